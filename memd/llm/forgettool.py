"""The ``forget_memory`` tool: the model forgets a memory, or merges one into another, and says why.

Forgetting is declared (``memd.core.declared``): the model names the memory, and for a merge the
memory that absorbs it, with a reason; memd deletes the file and its index entry on the staging copy
and records a ``Forgotten`` value, which the guard needs before an entry's words may go with its file
(``memd.core.guard.check(..., forgotten=...)``) and which the run's outcome, history and report
carry. The work is the confined memory tool's (``memd.llm.memtool.StagedMemory``: ``delete`` with a
``reason``, ``merge``); this module is the tool's schema, offered to the dream and the catch-up
beside the memory tool, and its dispatch.

Input: ``path`` (the memory, ``/memories/...``), ``reason`` (one sentence), and for a merge ``into``
(the memory that absorbs it: it must already hold each sentence of ``path``'s body, in any wording
that keeps the words that carry meaning) and ``stale`` (``[{"text", "reason"}]``: sentences of
``path`` that are no longer true and are not carried over).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memd.core.declared import MAX_REASON_CHARS

if TYPE_CHECKING:
    from memd.llm.memtool import StagedMemory

FORGET_TOOL_NAME = "forget_memory"
FORGET_TOOL: dict[str, Any] = {
    "name": FORGET_TOOL_NAME,
    "description": (
        "Forget one memory file, on purpose and with a reason: it is deleted together with its line in "
        "MEMORY.md. Without 'into': delete it (stale, contradicted, the user asked to forget it, never worth "
        "keeping). With 'into': merge it into another memory that already holds its facts (copy them there "
        "first with the memory tool); a sentence that is no longer true may be left behind when you name it in "
        "'stale' with why. memd refuses a merge that would lose a fact, and rejects a run that deletes a "
        "memory any other way and loses its words."),
    "input_schema": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "the memory to forget, e.g. /memories/project_freeze.md"},
            "reason": {"type": "string",
                       "description": f"why it is forgotten, in one sentence (at most {MAX_REASON_CHARS} characters)"},
            "into": {"type": "string", "description": "merge: the memory that absorbs it, e.g. /memories/x.md"},
            "stale": {"type": "array", "description": "merge: sentences of 'path' not carried over, each with why",
                      "items": {"type": "object",
                                "properties": {"text": {"type": "string"}, "reason": {"type": "string"}},
                                "required": ["text", "reason"]}},
        },
        "required": ["path", "reason"],
    },
}


def handler(tool: StagedMemory) -> Any:
    """The ``forget_memory`` handler over a run's memory tool: ``(text, is_error)`` like the others, and
    each call in the tool's ``ops`` for the run log (never content)."""
    from memd.llm.memtool import Refused

    def handle(inp: Any) -> tuple[str, bool]:
        if not isinstance(inp, dict):
            return "Error: give path and reason (and into, for a merge).", True
        path = inp.get("path")
        shown = path[:300] if isinstance(path, str) else ""
        op = "merge" if inp.get("into") else "forget"
        try:
            if inp.get("into"):
                text = tool.merge(path, inp.get("into"), inp.get("reason"), inp.get("stale", []))
            else:
                text = tool.delete({"path": path, "reason": inp.get("reason")})
        except Refused as e:
            tool.ops.append((op, shown, f"refused: {str(e)[:200]}"))
            return str(e), True
        tool.ops.append((op, shown, "ok"))
        return text, False

    return handle
