"""``provisioner check-config FILE``: every problem of a config, or a summary of what it sets up."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from config.load import load_config, public_url
from config.located import ConfigError
from config.models import Config


def _summary(cfg: Config, file: str) -> list[str]:
    served = set(cfg.instance.serves)
    api = cfg.api
    lines = [
        f"{file}: OK",
        f"  instance    {cfg.instance.id} (planner: {'yes' if cfg.instance.planner else 'no'})",
        f"  controller  {public_url(cfg.controller.url)}",
        f"  api         {api.listen} (tls: {'yes' if api.tls else 'no'}, tokens: {'yes' if api.tokens else 'no'})",
    ]
    width = max((len(p.name) for p in cfg.providers), default=0)
    label = "  providers   "
    for p in cfg.providers:
        where = "served here" if p.name in served else "served by another instance"
        style = f"{p.script.style} persistent" if p.script.mode == "persistent" else p.script.style
        lines.append(f"{label}{p.name:<{width}}  {p.kind:<5}  {style:<3}  {where}")
        label = " " * len(label)
    if not cfg.providers:
        lines.append(f"{label}none")
    label = "  resources   "
    width = max((len(r.name) for r in cfg.resources), default=0)
    for r in cfg.resources:
        how = f"elastic, base {r.base}, provider {r.provider}" if r.elastic else f"base {r.base}"
        lines.append(f"{label}{r.name:<{width}}  {how}")
        label = " " * len(label)
    if not cfg.resources:
        lines.append(f"{label}none")
    return lines


def check_config_main(
    path: str, out: TextIO | None = None, err: TextIO | None = None, *, check_files: bool = True
) -> int:
    """``provisioner check-config FILE``: every issue on ``err`` and 2, or a summary on ``out`` and 0.

    ``out`` and ``err`` default to the streams current at call time, so a test's capture sees them.
    """
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        cfg = load_config(Path(path), check_files=check_files)
    except ConfigError as exc:
        for issue in exc.issues:
            print(issue, file=err)
        return 2
    for line in _summary(cfg, path):
        print(line, file=out)
    if not check_files:
        print("  (files not checked: run it without --no-file-checks on the host the config is for)", file=out)
    return 0
