"""``provisioner reload``: have the running daemon read its config file again.

Through a daemon's REST API (``--url``): ``POST /v1/reload``, which answers
what changed or why the file was refused. On the daemon's own host: the
config is checked here first (a file with problems is reported as
``check-config`` reports it, exit 2, and the daemon is not disturbed), then
the daemon named by the pid file in its home gets SIGHUP and logs what
changed.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

from config.load import load_config
from config.located import ConfigError
from provisioner.daemon.pidfile import NAME, running_daemon


class ReloadError(Exception):
    """No daemon to reload, or no config to reload it with: one line."""


def over_rest(remote: Any) -> int:
    result = remote.reload()
    print(f"reloaded {result.get('config')}:")
    for line in result["changes"] or ["nothing changed"]:
        print(f"  {line}")
    for line in result["restart_needed"]:
        print(f"  (needs a restart) {line}")
    return 0


def by_signal(config: Path | None, default_home: Path) -> int:
    if config is None:
        raise ReloadError("no config file (--config, $PROVISIONER_CONFIG or ./provisioner.yaml): the built-in demo "
                          "has nothing to reload")
    try:
        cfg = load_config(config)
    except ConfigError as exc:
        for issue in exc.issues:
            print(issue, file=sys.stderr)
        print(f"provisioner: {config} has problems: the daemon was not asked to reload", file=sys.stderr)
        return 2
    home = cfg.home or default_home
    pid = running_daemon(home)
    if pid is None:
        raise ReloadError(f"no daemon runs on {home} ({home / NAME} names none): nothing to reload "
                          "(or give --url to reach one through its REST API)")
    try:
        os.kill(pid, signal.SIGHUP)
    except PermissionError:
        raise ReloadError(f"daemon pid {pid} runs as another user: run this as that user") from None
    print(f"{config}: OK; asked the daemon (pid {pid}) to reload it: its log says what changed")
    return 0
