"""A persistent provider's answer to one call, judged as a one-shot run of the same call would be.

Exit values mean what a one-shot script's exit codes mean, and an exit 0
answer's ``output`` goes through the same parser (``providers.contract``) and
the same rule for secrets and sizes (``providers.output``), so the owner
cannot tell a persistent answer from a one-shot one.
"""

from __future__ import annotations

from typing import Any

from config.models import ProviderConfig
from messages.scripts import Action, Outcome, ScriptResult
from providers.contract import ContractError, parse_output
from providers.environment import Scrubber
from providers.output import cleaned
from providers.runner import EXIT_OUTCOMES, REASON_TAIL


def clip(text: str) -> str:
    """One line of at most ``REASON_TAIL`` characters: control characters become spaces."""
    text = "".join(" " if ord(c) < 32 or ord(c) == 127 else c for c in text).strip()
    return text if len(text) <= REASON_TAIL else text[: REASON_TAIL - 3] + "..."


def result(cfg: ProviderConfig, action: Action, token: str | None, outcome: Outcome, reason: str,
           scrub: Scrubber | None = None, **extra: Any) -> ScriptResult:
    """A result named as the one-shot runner names them: ``<provider> <action>: <reason>``, scrubbed."""
    text = f"{cfg.name} {action}: {reason}" if reason else ""
    return ScriptResult(provider=cfg.name, action=action, outcome=outcome, reason=scrub(text) if scrub else text,
                        token=token, **extra)


def judge(cfg: ProviderConfig, action: Action, token: str | None, answer: dict[str, Any], scrub: Scrubber,
          duration: float) -> ScriptResult:
    """``{"exit": 0, "output": {...}}`` or ``{"exit": N, "message": "..."}`` as a ``ScriptResult``."""
    code = answer.get("exit")
    message = answer.get("message")
    said = clip(scrub(message)) if isinstance(message, str) else ""
    tail = f": {said}" if said else ""
    common: dict[str, Any] = {"duration_s": round(duration, 3)}
    if isinstance(code, bool) or not isinstance(code, int):
        return result(cfg, action, token, "bad_output", f"bad output: the answer's exit is not an integer "
                      f"(got {clip(repr(code))[:40]}){tail}", scrub, **common)
    if code == 0:
        output = answer.get("output")
        if not isinstance(output, dict):
            got = "nothing" if output is None else type(output).__name__
            return result(cfg, action, token, "bad_output", f"bad output: exit 0 without an output object "
                          f"(got {got}){tail}", scrub, exit_code=0, **common)
        try:
            parsed = cleaned(parse_output(cfg.script.style, cfg.kind, action, output, provider=cfg.name), scrub)
        except ContractError as exc:
            what = f"bad output: {exc}" if exc.outcome == "bad_output" else str(exc)
            return result(cfg, action, token, exc.outcome, clip(scrub(what)), scrub, exit_code=0, **common)
        return result(cfg, action, token, "ok", "", exit_code=0, output=parsed, **common)
    outcome, label = EXIT_OUTCOMES.get(code, ("failed", ""))
    meaning = f" ({label})" if label else ""
    return result(cfg, action, token, outcome, f"exit {code}{meaning}{tail}", scrub, exit_code=code, **common)
