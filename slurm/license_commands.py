"""Slurm's license commands, live: ``scontrol -o show licenses``, ``scontrol -o show reservation``, ``sacctmgr -i
modify resource`` and ``scontrol create/update reservation``, each with the bridge's timeout.

Every failure is a ``LicenseError`` of one line naming the command: slurmdbd
down (``sacctmgr`` cannot reach it), a resource ``sacctmgr`` does not know
(it says ``Nothing modified``), a reservation Slurm refuses.
"""

from __future__ import annotations

from collections.abc import Mapping

from slurm.commands import LiveSlurm
from slurm.licenses import Command, LicenseError, Seen, parse_licenses, parse_reservation


class LiveLicenses(LiveSlurm):
    """``LiveSlurm`` and the license commands (``slurm.licenses.LicensePort``)."""

    def _call(self, argv: list[str]) -> tuple[int, str, str]:
        done = self._spawn(argv, " ".join(argv[:6]), LicenseError)
        return done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")

    def _text(self, argv: list[str]) -> str:
        rc, out, err = self._call(argv)
        if rc != 0:
            lines = [ln.strip() for ln in (err + "\n" + out).splitlines() if ln.strip()]
            said = lines[-1] if lines else "no message"
            if argv[0] == "sacctmgr" and "Nothing modified" in out:
                said = "sacctmgr knows no such resource (Nothing modified)"
            raise LicenseError(f"{' '.join(argv[:6])}: exit {rc}: {said}")
        return out

    def licenses(self) -> Mapping[str, Seen]:
        return parse_licenses(self._text(["scontrol", "-o", "show", "licenses"]))

    def reservation(self, name: str) -> Mapping[str, int] | None:
        argv = ["scontrol", "-o", "show", "reservation", name]
        rc, out, err = self._call(argv)
        if rc != 0 and "not found" in out + err:
            return None
        if rc != 0:
            return parse_reservation(self._text(argv), " ".join(argv))  # raises, naming what Slurm said
        return parse_reservation(out, " ".join(argv))

    def send(self, command: Command) -> None:
        name, _, server = command.license.partition("@")
        if command.what == "count":
            self._text(["sacctmgr", "-i", "modify", "resource", f"name={name}", f"server={server}", "set",
                        f"count={command.value}"])
            return
        licenses = f"licenses={command.license}:{command.value}"
        if command.exists:
            self._text(["scontrol", "update", f"reservationname={command.reservation}", licenses])
        else:
            self._text(["scontrol", "create", "reservation", f"reservationname={command.reservation}", licenses,
                        "starttime=now", "duration=infinite", "flags=license_only", f"users={command.user}"])
