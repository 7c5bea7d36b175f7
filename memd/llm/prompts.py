"""The prompts memd sends to models, kept as package files (``memd/prompts/<name>.md``).

A prompt may name the budgets memd enforces as ``{{key}}`` placeholders (``max_tool_turns``,
``max_tool_calls``, ``max_searches``, ``max_input_tokens``, ``max_topic_files``, ...): ``render``
fills them from the values given (``budgets`` builds them from the config), so the model is told
the very numbers the code enforces. The rendered text depends on the config only, never on a
project: it is the shared, cached first block of every request (byte-identical for every project).
"""

from __future__ import annotations

import re
from importlib import resources
from typing import TYPE_CHECKING

from memd.errors import UsageError

if TYPE_CHECKING:
    from memd.config import Config

NAMES = ("catchup", "dream", "recall")
_PLACEHOLDER = re.compile(r"\{\{([a-z_]+)\}\}")


def load(name: str) -> str:
    """The text of prompt ``name`` (one of NAMES), placeholders unfilled."""
    if name not in NAMES:
        raise UsageError(f"no prompt {name!r} (known: {', '.join(NAMES)})")
    return resources.files("memd").joinpath("prompts", f"{name}.md").read_text(encoding="utf-8")


def budgets(config: Config) -> dict[str, int]:
    """The numbers the prompts state, as the jobs enforce them."""
    from memd.llm.client import MAX_TOOL_CALLS

    return {"catchup_max_tool_turns": config.catchup.max_tool_turns,
            "catchup_max_input_tokens": config.catchup.max_input_tokens,
            "dream_max_tool_turns": config.dream.max_tool_turns,
            "dream_max_searches": config.dream.max_searches,
            "dream_max_input_tokens": config.dream.max_input_tokens,
            "max_tool_calls": MAX_TOOL_CALLS,
            "max_topic_files": config.budget.max_topic_files,
            "max_index_lines": config.budget.max_lines,
            "max_index_chars": config.budget.max_chars}


def render(name: str, config: Config) -> str:
    """Prompt ``name`` with its placeholders filled from ``config`` (``budgets``); a placeholder
    without a value is an error (a prompt must never tell the model a number memd does not enforce)."""
    values = budgets(config)

    def fill(m: re.Match[str]) -> str:
        if m.group(1) not in values:
            raise UsageError(f"prompt {name!r}: no value for {{{{{m.group(1)}}}}}")
        return f"{values[m.group(1)]:,}"

    return _PLACEHOLDER.sub(fill, load(name))


def names() -> tuple[str, ...]:
    return NAMES
