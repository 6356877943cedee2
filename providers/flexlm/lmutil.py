"""Running ``lmutil lmstat -a -c SPEC``: the one way this provider asks the license server anything.

The reader is a plain callable (spec in, text out) so that the actions can be
given a fake in tests and a caching one in a long-running mode, and never
start a process themselves.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping

from providers.flexlm.errors import ConfigError, Transient

LmstatReader = Callable[[str], str]

#: The longest lmstat may take when the daemon set no deadline (``PROVISIONER_DEADLINE``).
DEFAULT_TIMEOUT_S = 30.0
#: Left before the daemon's deadline to print an answer after lmstat returns.
MARGIN_S = 2.0


def lmstat_reader(lmutil: str, environ: Mapping[str, str] | None = None) -> LmstatReader:
    environ = dict(os.environ if environ is None else environ)

    def read(spec: str) -> str:
        # lmutil gets the provider's environment as it is: a site that needs FlexNet's own variables
        # (FLEXLM_TIMEOUT for a distant server) sets them in the provider's env_file.
        timeout = _budget(environ)
        try:
            # A group of its own: sites often wrap lmutil in a script, and on a timeout the whole
            # group goes, or a child left holding the pipes would keep this call waiting.
            proc = subprocess.Popen([lmutil, "lmstat", "-a", "-c", spec], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environ,
                                    start_new_session=True)
        except FileNotFoundError:
            raise ConfigError(f"lmutil: not found: {lmutil}") from None
        except PermissionError:
            raise ConfigError(f"lmutil: not executable: {lmutil}") from None
        except OSError as exc:
            raise ConfigError(f"lmutil: cannot run {lmutil}: {exc.strerror or exc}") from None
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise Transient(f"lmstat on {spec} gave no answer within {timeout:.0f}s") from None
        # lmstat prints most errors on stdout, some versions on stderr: read both.
        text = (out + b"\n" + err).decode("utf-8", errors="replace")
        if not text.strip():
            raise Transient(f"lmstat on {spec} exited {proc.returncode} and printed nothing")
        return text

    return read


def _budget(environ: Mapping[str, str]) -> float:
    deadline = environ.get("PROVISIONER_DEADLINE", "")
    try:
        left = float(deadline) - time.time() - MARGIN_S if deadline else DEFAULT_TIMEOUT_S
    except ValueError:
        left = DEFAULT_TIMEOUT_S
    return max(1.0, min(DEFAULT_TIMEOUT_S, left))
