"""UserPromptSubmit: recall (opt-in, ``hooks.recall``). See memd.recall for what it does.

With recall off (the default) this costs one look at the config file: a config without a
``recall`` key, or with a plain ``recall = false``, cannot have turned it on, so nothing is loaded.
"""

from __future__ import annotations

import os
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
    from pathlib import Path  # recall works on Paths (and imports the SDK): pathlib is the least of it

    from memd import ccsettings, recall
    from memd.hooks.session import project_for_cwd

    claude = hc.claude_dir()
    settings = ccsettings.merged(claude, cwd)  # every scope, read once for all three questions
    if ccsettings.memory_disabled(claude, settings):
        return None
    found = project_for_cwd(cwd, claude, settings)
    if found is None or not os.path.isdir(found[1]):
        return None
    name, memory_dir = found

    def abandon() -> None:
        hc.abandoned_work = True

    session = event.get("session_id")
    timeout = cfg.hooks.recall_timeout_s - (time.monotonic() - started)
    result = recall.recall(prompt, Path(memory_dir), cfg, state_dir=Path(hc.state_dir),
                           session_id=session if isinstance(session, str) and session else None,
                           timeout_s=timeout, on_abandon=abandon)
    hc.log("info", "hook.recall", project=name, chosen=result.chosen, dropped=len(result.dropped),
           left=len(result.left), note=result.note, **{f"usage_{k}": v for k, v in result.usage.items()})
    if not result.text:
        return None
    return {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": result.text}}
