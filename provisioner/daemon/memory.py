"""Memory freed goes back to the system (glibc's allocator): large buffers, heaps of threads, start-up's bursts.

glibc serves an allocation of 128 KiB or more with a mapping of its own, unmapped
when freed, until the first such block is freed: then it raises that threshold
to the block's size (up to 32 MiB), so later large blocks come from the heap,
and once freed they stay resident between the small objects that outlive them.
A daemon reads script outputs and fact chunks, and writes snapshots of a large
projection, all of them such blocks. Fixing the threshold took some 7 MiB off a
daemon with 1,000 providers and 100,000 instances. Other C libraries have no
such rule, and an operator who set ``MALLOC_MMAP_THRESHOLD_`` keeps their value.

glibc also gives threads heaps of their own, up to eight per core, each keeping
what its threads freed. The daemon's threads run Python, one at a time, so they
gain nothing from them; two arenas serve them (``MALLOC_ARENA_MAX`` keeps the
operator's choice). And the start of a daemon taking up many providers is a
burst: every provider described and asked what it holds within seconds. Once the
owners' first scans are over, what that burst freed inside the heaps is given
back (``malloc_trim``), as it would be only at the heap's top otherwise.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys

log = logging.getLogger(__name__)

#: glibc's ``mallopt`` parameters for the threshold and the number of arenas (malloc.h).
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
#: Arenas for the daemon's threads.
ARENAS = 2
#: glibc's own starting value, kept from then on.
THRESHOLD = 128 * 1024


def fix_mmap_threshold(threshold: int = THRESHOLD) -> bool:
    """Keep allocations of ``threshold`` bytes or more out of the heap from now on; False if not done."""
    return _mallopt("MALLOC_MMAP_THRESHOLD_", M_MMAP_THRESHOLD, threshold, "the mmap threshold")


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Let threads started from now on share at most ``arenas`` heaps; False if not done."""
    return _mallopt("MALLOC_ARENA_MAX", M_ARENA_MAX, arenas, "the number of arenas")


def _mallopt(variable: str, param: int, value: int, what: str) -> bool:
    if not sys.platform.startswith("linux") or variable in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    done = mallopt(param, value) == 1
    if not done:
        log.debug("memory: this C library's mallopt refused %s", what)
    return done


def give_back_freed() -> bool:
    """Return the free memory inside every heap to the system (glibc's ``malloc_trim``); False if not done."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes, trim.restype = (ctypes.c_size_t,), ctypes.c_int
    trim(0)
    return True
