"""Slurm's license commands, live (issue 30): what each sends, and each refusal as one line naming the command and
what Slurm said (the messages are Slurm 22.05's, as printed here with slurmdbd's database down, an unknown
resource, no such reservation)."""

from __future__ import annotations

import pytest

from slurm.license_commands import LiveLicenses
from slurm.licenses import Command, LicenseError
from tests.slurm.test_commands import FIXTURES, commands, ran


def test_licenses_and_a_reservation_are_read_and_a_missing_reservation_is_none(tmp_path):
    env = commands(tmp_path, scontrol=f'''
case "$*" in
  "-o show licenses") cat "{FIXTURES / "scontrol-show-lic-22.05.txt"}";;
  "-o show reservation provisioner-vcs") cat "{FIXTURES / "scontrol-show-reservation-22.05.txt"}";;
  *) echo "Reservation $5 not found"; exit 1;;
esac''')
    live = LiveLicenses(env=env)
    assert live.licenses()["vcs@flex"].reserved == 10
    assert live.reservation("provisioner-vcs") == {"vcs@flex": 10}
    assert live.reservation("nonesuch") is None


def test_the_total_goes_by_sacctmgr_and_the_reservation_is_made_then_updated(tmp_path):
    env = commands(tmp_path, sacctmgr="echo ' Modified server resource ...'", scontrol="echo 'Reservation updated.'")
    live = LiveLicenses(env=env)
    live.send(Command("count", "vcs@flex", 12))
    live.send(Command("reserve", "vcs@flex", 10, "provisioner-vcs", "root", exists=False))
    live.send(Command("reserve", "vcs@flex", 6, "provisioner-vcs", "root", exists=True))
    assert ran(tmp_path) == [
        "sacctmgr -i modify resource name=vcs server=flex set count=12",
        "scontrol create reservation reservationname=provisioner-vcs licenses=vcs@flex:10 starttime=now "
        "duration=infinite flags=license_only users=root",
        "scontrol update reservationname=provisioner-vcs licenses=vcs@flex:6"]


@pytest.mark.parametrize("body, said", [
    ("echo ' Nothing modified'; exit 1", "exit 1: sacctmgr knows no such resource (Nothing modified)"),
    ("echo 'sacctmgr: error: Sending PersistInit msg: Unable to connect to database' >&2; exit 1",
     "exit 1: sacctmgr: error: Sending PersistInit msg: Unable to connect to database"),
    ("sleep 5", "timed out after 0.5s"),
])
def test_sacctmgr_refusing_is_one_line_naming_the_command_and_what_it_said(tmp_path, body, said):
    live = LiveLicenses(env=commands(tmp_path, sacctmgr=body), timeout=0.5)
    with pytest.raises(LicenseError) as exc:
        live.send(Command("count", "vcs@flex", 12))
    assert str(exc.value) == f"sacctmgr -i modify resource name=vcs server=flex: {said}"


def test_a_reservation_slurm_refuses_names_it(tmp_path):
    env = commands(tmp_path, scontrol="echo 'Error updating the reservation: Invalid license specification' >&2; "
                                      "echo 'slurm_update error: Invalid license specification' >&2; exit 1")
    with pytest.raises(LicenseError, match=r"^scontrol update reservationname=provisioner-vcs licenses=nope@flex:1: "
                                           r"exit 1: slurm_update error: Invalid license specification$"):
        LiveLicenses(env=env).send(Command("reserve", "nope@flex", 1, "provisioner-vcs", "root", exists=True))
