"""The liar soak as bench rows: a real daemon against lying, failing, slow providers for minutes, then the
providers' ground truth against the facts (tests/support/soak.py, tests/support/ledger.py).

``python -m bench.soak --seconds 600 --seeds 1,2,3`` runs longer soaks and prints what each did.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tests.support import soak

#: The bench's soak: its seed and how long its storm lasts.
SEED = 3
STORM = 150.0
#: Time to settle once the workload is gone: past the longest hiding, the graces and a few searches.
CALM = 90.0


def liar_soak(tmp: Path, smoke: bool) -> tuple[float, float, float, float]:
    """Leaked instance-seconds beyond the graces, double creations, units returned in use, and what was still
    held (at a provider or in the facts) once the calm was over. Smoke mode: a storm of a few seconds."""
    r = soak.run(tmp, soak.Plan(seed=SEED, storm=6.0 if smoke else STORM, calm=30.0 if smoke else CALM))
    print(r.summary(), file=sys.stderr, flush=True)
    if r.ledger.explain():
        print(r.ledger.explain(), file=sys.stderr, flush=True)
    return (r.ledger.leaked_seconds, float(r.ledger.double_creations), float(r.ledger.units_returned_in_use),
            float(len(r.ledger.held_at_end)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.soak", description="Run liar soaks and print their ledgers.")
    ap.add_argument("--seconds", type=float, default=STORM, help="the storm's length (default %(default)s)")
    ap.add_argument("--seeds", default=str(SEED), help="comma-separated seeds (default %(default)s)")
    ap.add_argument("--calm", type=float, default=CALM, help="at most this long to settle (default %(default)s)")
    ap.add_argument("--keep", type=Path, help="keep each run's world (controller, providers, logs) in KEEP/seed-N")
    args = ap.parse_args(argv)
    clean = True
    for seed in (int(s) for s in args.seeds.split(",")):
        if args.keep:
            (args.keep / f"seed-{seed}").mkdir(parents=True)
            r = soak.run(args.keep / f"seed-{seed}", soak.Plan(seed=seed, storm=args.seconds, calm=args.calm))
        else:
            with tempfile.TemporaryDirectory(prefix=f"provisioner-soak-{seed}-") as tmp:
                r = soak.run(Path(tmp), soak.Plan(seed=seed, storm=args.seconds, calm=args.calm))
        print(r.summary(), flush=True)
        if r.ledger.explain():
            print(r.ledger.explain(), flush=True)
        clean = clean and r.clean
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
