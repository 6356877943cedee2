"""pykka actors: lease, journal, budget, planner, provider, and their wiring."""
