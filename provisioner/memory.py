"""Large short-lived buffers go back to the system when freed (glibc's allocator).

glibc serves an allocation of 128 KiB or more with a mapping of its own, unmapped
when freed, until the first such block is freed: then it raises that threshold
to the block's size (up to 32 MiB), so later large blocks come from the heap,
and once freed they stay resident between the small objects that outlive them.
A daemon reads script outputs and fact chunks, and writes snapshots of a large
projection, all of them such blocks. Fixing the threshold took some 7 MiB off a
daemon with 1,000 providers and 100,000 instances. Other C libraries have no
such rule, and an operator who set ``MALLOC_MMAP_THRESHOLD_`` keeps their value.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys

log = logging.getLogger(__name__)

#: glibc's ``mallopt`` parameter for the threshold (malloc.h).
M_MMAP_THRESHOLD = -3
#: glibc's own starting value, kept from then on.
THRESHOLD = 128 * 1024


def fix_mmap_threshold(threshold: int = THRESHOLD) -> bool:
    """Keep allocations of ``threshold`` bytes or more out of the heap from now on; False if not done."""
    if not sys.platform.startswith("linux") or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    done = mallopt(M_MMAP_THRESHOLD, threshold) == 1
    if not done:
        log.debug("memory: this C library's mallopt refused the mmap threshold")
    return done
