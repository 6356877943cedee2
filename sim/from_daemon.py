"""The daemon's own config as a simulator config: ``provisioner sim --config /etc/provisioner/provisioner.yaml``.

The simulator needs what the planner sees of each provider (its
description), the operator's limits for it, the policy, the budget and the
resources. A daemon config has all of it but the descriptions, which its
providers give themselves: each provider's ``describe`` is run once, as the
daemon would run it (a provider whose describe fails is an error naming
it), and merged with the config's ``describe`` overrides. The parts the
simulator has no use for (``instance``, ``controller``, ``api``, ``home``,
the scripts' other settings) are ignored. Each provider behaves as its
description says (lead time as described, no failures); write a simulator
config (``examples/sim.yaml``) to model failures, capacity or reclaims.
"""

from __future__ import annotations

import queue
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from config.load import load_config
from config.located import ConfigError, ConfigIssue, one_line, parse_located
from config.models import Config, ProviderConfig
from messages.description import ProviderDescription
from messages.scripts import ScriptResult
from providers.describe import merge_description
from providers.runner import ScriptRunner
from sim.config import SimConfig, load_sim_config

#: Keys only a daemon config has at its top level.
DAEMON_KEYS = ("instance", "controller")

Describe = Callable[[ProviderConfig], ScriptResult]


def is_daemon_config(path: Path) -> bool:
    """Whether ``path`` holds a daemon config rather than a simulator config (by its top-level keys)."""
    try:
        data, _, issues = parse_located(Path(path).read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError):
        return False
    return not issues and isinstance(data, dict) and any(k in data for k in DAEMON_KEYS)


def run_describe(provider: ProviderConfig) -> ScriptResult:
    """One ``describe`` of a provider, run as the daemon runs its scripts, in a scratch work folder."""
    results: queue.Queue[ScriptResult] = queue.Queue()
    with tempfile.TemporaryDirectory(prefix=f"sim-describe-{provider.name}-") as work:
        runner = ScriptRunner(provider, Path(work), lambda result, _tag: results.put(result), idle_exit=1.0)
        try:
            runner.submit("describe", {})
            wait = provider.script.timeouts.get("describe", provider.script.timeout) + 30.0
            try:
                return results.get(timeout=wait)
            except queue.Empty:
                return ScriptResult(provider=provider.name, action="describe", outcome="timeout",
                                    reason=f"no answer within {wait:.0f}s")
        finally:
            runner.stop()


def sim_data(cfg: Config, file: str, describe: Describe = run_describe) -> dict[str, Any]:
    """The simulator config (as data, for ``--compare`` to change) of a daemon config."""
    issues: list[ConfigIssue] = []
    providers = []
    for i, p in enumerate(cfg.providers):
        result = describe(p)
        if not result.ok or not isinstance(result.output, ProviderDescription):
            why = result.reason or f"outcome {result.outcome}"
            issues.append(ConfigIssue(file, None, f"providers[{i}]", f"provider {p.name}: describe failed: {why}"))
            continue
        desc = merge_description(p, result.output)
        providers.append({"description": desc.model_dump(mode="json", exclude_none=True),
                          "policy": p.policy.model_dump(mode="json", exclude_none=True),
                          "behaviour": {"tokens": p.script.style == "v2"}})
    if issues:
        raise ConfigError(issues)
    if not providers:
        raise ConfigError([ConfigIssue(file, None, "providers", "no providers: nothing to simulate")])
    return {
        # The section as the operator wrote it (the defaults it left out fit what --compare changes).
        "lease": cfg.lease.model_dump(mode="json", exclude_unset=True),
        "policy": cfg.policy.model_dump(mode="json", exclude_none=True),
        "budget": cfg.budget.model_dump(mode="json", exclude_none=True),
        "providers": providers,
        "resources": [r.model_dump(mode="json", exclude_none=True) for r in cfg.resources],
    }


def load_any(path: Path, describe: Describe = run_describe) -> tuple[SimConfig, dict[str, Any], bool]:
    """A simulator config, or a daemon config made into one; the bool says which it was (True: the daemon's)."""
    if not is_daemon_config(path):
        cfg, raw = load_sim_config(path)
        return cfg, raw, False
    daemon = load_config(path, check_files=False)
    raw = sim_data(daemon, str(path), describe)
    try:
        return SimConfig.model_validate(raw), raw, True
    except ValidationError as exc:
        # A daemon config check-config takes should always make one; if not, still one line, no dump.
        why = one_line(exc, raw, SimConfig)
        raise ConfigError([ConfigIssue(str(path), None, "", f"cannot be simulated: {why}")]) from None
