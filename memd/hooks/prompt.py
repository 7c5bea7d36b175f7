"""UserPromptSubmit: recall (opt-in, ``hooks.recall``). See memd.recall for what it does.

With recall off (the default) this costs one look at the config file: a config without a
``recall`` key, or with a plain ``recall = false``, cannot have turned it on, so nothing is loaded.
"""

from __future__ import annotations

import time

from memd.hooks.context import HookContext

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def user_prompt_submit(event: dict[str, Any], hc: HookContext) -> dict[str, Any] | None:
    started = time.monotonic()
    prompt = event.get("prompt")
    cwd = event.get("cwd")
    if not isinstance(prompt, str) or not prompt.strip() or not isinstance(cwd, str) or not cwd:
        return None
    if not hc.recall_may_be_on():
        return None
    cfg = hc.config
    if not cfg.hooks.recall:
        return None
    from pathlib import Path

    from memd import layout, recall
    from memd.hooks.session import project_for_cwd

    claude = Path(hc.claude_dir())
    settings = layout.read_settings(claude, cwd)  # every scope, read once for all three questions
    if layout.memory_disabled(claude, settings):
        return None
    project = project_for_cwd(cwd, hc, settings)
    if project is None or not project.memory_dir.is_dir():
        return None

    def abandon() -> None:
        hc.abandoned_work = True

    session = event.get("session_id")
    timeout = cfg.hooks.recall_timeout_s - (time.monotonic() - started)
    result = recall.recall(prompt, project.memory_dir, cfg, state_dir=Path(hc.state_dir),
                           session_id=session if isinstance(session, str) and session else None,
                           timeout_s=timeout, on_abandon=abandon)
    hc.log("info", "hook.recall", project=project.name, chosen=result.chosen, dropped=len(result.dropped),
           left=len(result.left), note=result.note, **{f"usage_{k}": v for k, v in result.usage.items()})
    if not result.text:
        return None
    return {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": result.text}}
