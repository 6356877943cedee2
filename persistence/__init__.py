"""The fact-store and controller-input port, its backends, and projections."""
