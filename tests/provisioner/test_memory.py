"""The daemon keeps glibc from serving large buffers from the heap after one is freed, or keeping what it freed."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from provisioner.daemon.memory import fix_mmap_threshold, limit_arenas

#: Frees a 1 MiB block (which makes glibc raise its threshold), then asks for 512 KiB and prints
#: whether that block got a mapping of its own (mallinfo2's ``hblks`` grew).
PROBE = """
import ctypes, sys
from provisioner.daemon.memory import fix_mmap_threshold
if sys.argv[1] == "fixed":
    assert fix_mmap_threshold()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = (ctypes.c_void_p,)
class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]
libc.mallinfo2.restype = Info
libc.free(libc.malloc(1 << 20))
before = libc.mallinfo2().hblks
block = libc.malloc(512 << 10)
print(libc.mallinfo2().hblks - before)
"""


def _mapped_blocks(mode: str) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=60, env=env,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert out.returncode == 0, out.stderr
    return int(out.stdout)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the threshold and its rule are glibc's")
def test_a_large_block_after_a_larger_one_was_freed_still_gets_its_own_mapping():
    assert _mapped_blocks("default") == 0, "glibc's own rule: the freed 1 MiB block raised the threshold"
    assert _mapped_blocks("fixed") == 1


def test_an_operators_own_threshold_is_left_alone(monkeypatch):
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    assert fix_mmap_threshold() is False


def test_an_operators_own_number_of_arenas_is_left_alone(monkeypatch):
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_arenas() is False


#: Fills the heap with 64 MiB of blocks below the mmap threshold, frees every other one (holes that the
#: blocks kept on either side stop free() from giving back: only a trim can), then prints the resident
#: MiB before and after giving back what was freed.
TRIM_PROBE = """
import ctypes
from provisioner.daemon.memory import give_back_freed
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = (ctypes.c_void_p,)
libc.memset.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t)
def resident():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 >> 20
blocks = [libc.malloc(64 << 10) for _ in range(1024)]
for b in blocks:
    libc.memset(b, 1, 64 << 10)
for b in blocks[::2]:
    libc.free(b)
before = resident()
assert give_back_freed()
print(before, resident())
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_what_was_freed_inside_the_heap_goes_back_to_the_system():
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", TRIM_PROBE], capture_output=True, text=True, timeout=60, env=env,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert out.returncode == 0, out.stderr
    before, after = map(int, out.stdout.split())
    assert before - after >= 24, f"{before} MiB resident before, {after} MiB after"


#: What ``provisioner run`` imports before it serves a configured daemon (``cmd_run``), then the
#: simulator's modules among what is loaded.
RUN_IMPORTS = """
import sys
import provisioner.cli.main, provisioner.daemon.root, provisioner.daemon.memory, provisioner.daemon.resetguard
print(" ".join(sorted(m for m in sys.modules if m.startswith("sim."))))
"""


def test_a_configured_daemon_loads_none_of_the_simulator():
    """The demo's workload and ``trace export`` import the simulator when used: a daemon serving
    real providers holds none of its modules (only ``sim``'s package, for the demo's paths)."""
    out = subprocess.run([sys.executable, "-c", RUN_IMPORTS], capture_output=True, text=True, timeout=60,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == []


#: The REST stack's libraries among what importing the daemon loads.
DAEMON_IMPORTS = """
import sys
import provisioner.daemon.root
print(" ".join(sorted(m for m in sys.modules if m.split(".")[0] in ("fastapi", "starlette", "uvicorn"))))
"""


def test_a_daemon_that_serves_no_rest_api_loads_none_of_its_stack():
    """FastAPI, Starlette and uvicorn (with the API's models some 12 MiB resident) are loaded by a daemon
    that serves the REST API, when it starts serving: importing the daemon loads none of them."""
    out = subprocess.run([sys.executable, "-c", DAEMON_IMPORTS], capture_output=True, text=True, timeout=60,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == []
