"""The prompts memd sends to models, kept as package files (``memd/prompts/<name>.md``)."""

from __future__ import annotations

from importlib import resources

from memd.errors import UsageError

NAMES = ("catchup", "dream", "recall")


def load(name: str) -> str:
    """The text of prompt ``name`` (one of NAMES)."""
    if name not in NAMES:
        raise UsageError(f"no prompt {name!r} (known: {', '.join(NAMES)})")
    return resources.files("memd").joinpath("prompts", f"{name}.md").read_text(encoding="utf-8")


def names() -> tuple[str, ...]:
    return NAMES
