"""The operator's surface: what operators and the scheduler can see and do (``operations``), one Protocol."""
