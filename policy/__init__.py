"""Pure decision functions: no threads, no I/O, no clock (time is an argument).

The same code plans in the live daemon and in the simulator.
"""
