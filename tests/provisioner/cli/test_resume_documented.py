"""Reviving a disabled provider is documented where an operator looks: the CLI's help and the operations
guide (issue 20, item 11); and resume does revive it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from messages.description import ProviderDescription
from messages.facts import ProviderAdmin, ProviderDescribed, make_fact
from persistence.controller import open_controller
from persistence.replay import replay

DOCS = Path(__file__).resolve().parents[3] / "docs" / "operations.md"


def test_provider_resume_help_says_it_revives_a_disabled_provider():
    r = subprocess.run([sys.executable, "-m", "provisioner.cli", "provider", "--help"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0
    assert re.search(r"resume\s+undo pause or drain, or revive a provider the daemon\s+disabled", r.stdout)


def test_the_operations_guide_says_how_to_revive_a_disabled_provider():
    text = DOCS.read_text()
    section = text[text.index("### Reviving a disabled provider"):]
    section = section[:section.index("\n## ")]
    for needed in ("provisioner provider resume", "/v1/providers/aws-east/resume", "exits 77", "78",
                   "status_reason", "disables it again"):
        assert needed in section, needed


def test_resume_makes_a_disabled_provider_active(tmp_path):
    url = f"sqlite:///{tmp_path / 'state.db'}"
    c = open_controller(url)
    c.append([make_fact(ProviderDescribed(description=ProviderDescription(name="aws", kind="hosts")),
                        provider="aws"),
              make_fact(ProviderAdmin(kind="provider_disabled", reason="exit 77: bad keys"), provider="aws")])
    assert replay(c).providers["aws"].status == "disabled"
    r = subprocess.run([sys.executable, "-m", "provisioner.cli", "--controller", url, "provider", "resume", "aws",
                        "--reason", "keys rotated"], capture_output=True, text=True, timeout=60,
                       env={"PROVISIONER_HOME": str(tmp_path / "home")})
    assert r.returncode == 0, r.stderr
    assert replay(c).providers["aws"].status == "active"
    c.close()
