"""The demo's state outlives a checkout: a provider a run from another checkout disabled because its script
was not found there is resumed by the demo of this one; a provider disabled for any other cause stays so."""

from __future__ import annotations

from messages.facts import ProviderAdmin, make_fact
from persistence.controller import open_controller
from persistence.replay import replay
from provisioner.cli.demo import demo_config, revive_moved


def _disable(controller, provider: str, reason: str) -> None:
    controller.append([make_fact(ProviderAdmin(kind="provider_disabled", reason=reason), provider=provider)])


def test_a_provider_disabled_for_another_checkouts_missing_script_is_resumed_and_no_other(tmp_path):
    home = tmp_path / "home"
    cfg = demo_config(home)
    here = str(cfg.provider("sim-hosts").script.path)
    controller = open_controller(cfg.controller.url)
    try:
        _disable(controller, "sim-hosts", "sim-hosts list: script not found: /gone/checkout/sim/scripts/sim-provider")
        _disable(controller, "sim-licenses", "sim-licenses usage: exit 78 (config): bad pool")
        assert revive_moved(controller, cfg) == ["sim-hosts"]
        p = replay(controller)
        assert p.providers["sim-hosts"].status == "active"
        assert here in p.providers["sim-hosts"].status_reason
        assert p.providers["sim-licenses"].status == "disabled", "another cause: an operator's to fix"
        assert revive_moved(controller, cfg) == [], "nothing more to resume"
        # Disabled because the script is missing from this very checkout: resuming would only fail again.
        _disable(controller, "sim-hosts", f"sim-hosts list: script not found: {here}")
        assert revive_moved(controller, cfg) == []
        assert replay(controller).providers["sim-hosts"].status == "disabled"
    finally:
        controller.close()
