"""The fact model: the projection the facts fold into (one code path for replay and live), its shared
copy, host names and per-item decisions. Pure data and rules over ``messages``; what touches a disk or a
network lives in ``persistence``, which builds these from what it reads."""
