"""The bridge's port to Slurm, live: its commands run with a timeout, their ``--json`` read by ``slurm.formats``.

Every failure is a ``SlurmError`` of one line naming the command: missing
(not installed, or not on PATH), exited non-zero (with its last line of
stderr), timed out, or printed what cannot be read. ``slurm.sync`` ends its
round on one, before anything is sent.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence

from slurm.formats import FormatError, Job, Node, jobs, nodes
from slurm.sync import SlurmError


class LiveSlurm:
    def __init__(self, timeout: float = 10.0, env: Mapping[str, str] | None = None) -> None:
        """``env``: the commands' environment (``SLURM_CONF`` and ``PATH`` matter); default, this process's."""
        self.timeout = timeout
        self.env = dict(os.environ if env is None else env)
        #: 22.05's ``sinfo --json`` lists nodes (its scontrol has no ``--json``); from 23.02 on it lists groups
        #: of nodes, and ``scontrol show nodes --json`` lists them: learnt from the first answer.
        self._nodes_argv = ["sinfo", "--json"]

    def _spawn(self, argv: list[str], shown: str,
               error: type[Exception] = SlurmError) -> subprocess.CompletedProcess[bytes]:
        """Run ``argv`` with the bridge's timeout; a command missing or timed out is ``error`` naming ``shown``."""
        try:
            return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=self.timeout,
                                  env=self.env)
        except FileNotFoundError:
            raise error(f"{shown}: {argv[0]} not found on PATH (is Slurm's client installed?)") from None
        except subprocess.TimeoutExpired:
            raise error(f"{shown}: timed out after {self.timeout:g}s") from None

    def _run(self, argv: list[str]) -> bytes:
        shown = " ".join(argv[:4])
        done = self._spawn(argv, shown)
        if done.returncode != 0:
            lines = [ln for ln in done.stderr.decode(errors="replace").splitlines() if ln.strip()]
            raise SlurmError(f"{shown}: exit {done.returncode}: {lines[-1].strip() if lines else 'no message'}")
        return done.stdout

    def nodes(self) -> Sequence[Node]:
        try:
            text = self._run(self._nodes_argv)
            if self._nodes_argv[0] == "sinfo" and b'"nodes"' not in text[:1 << 20] and b'"sinfo"' in text:
                self._nodes_argv = ["scontrol", "show", "nodes", "--json"]
                text = self._run(self._nodes_argv)
            return nodes(text, " ".join(self._nodes_argv))
        except FormatError as exc:
            raise SlurmError(str(exc)) from None

    def jobs(self) -> Sequence[Job]:
        try:
            return jobs(self._run(["squeue", "--json"]))
        except FormatError as exc:
            raise SlurmError(str(exc)) from None

    def scontrol(self, args: list[str]) -> None:
        self._run(["scontrol", *args])
