"""The owner of one provider, as decisions: what to write and which provider calls to make.

Every function here is pure: given the provider's part of the projection,
its settings (``OwnerSettings``), ``now`` and one input (an order, a call's
result, host events, a tick), it returns ``Effects``: the facts to write and
the provider calls to make. Nothing here writes, calls, sleeps or reads a
clock. Two drivers carry the effects out: the live ``actors.provider``
(timers, what is in flight, writes through the journal, calls through the
script runner) and the simulator's ``sim.owner`` (the same effects on a
virtual clock, calls answered by a simulated provider). So the daemon and
the simulator cannot decide differently.
"""
