"""The dream's ``resolve_conflict`` tool: the model says what it decided about a sync conflict block.

A block (``memd.core.conflict``) holds the other machine's differing lines; the model resolves it with
ordinary edits through the memory tool (the block removed whole, the right words kept) and says, with
this tool, per block: which side is current (``this``, ``other``), that both facts hold (``both``), or
that it cannot tell and left a note asking the user (``ask``), and why. The tool writes nothing: it
records the decision, which the guard needs before a block's words may go
(``memd.core.guard.block_reasons``) and which the run's report and history carry. Blocks are named by
their file and the line of their opening marker as the run found them (the line numbers the dream's
material shows); a second decision about one block replaces the first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memd.core import conflict as cblock

RESOLVE_TOOL_NAME = "resolve_conflict"
MAX_REASON_CHARS = 300
RESOLVE_TOOL: dict[str, Any] = {
    "name": RESOLVE_TOOL_NAME,
    "description": (
        "Say what you decided about one sync conflict block (a '<!-- memd sync conflict: ... -->' ... "
        "'<!-- memd sync conflict end -->' block in a memory file). Call it once per block you resolve, and "
        "make the edit with the memory tool: remove the block whole (both marker lines) and keep the right "
        "words. decision: 'this' (this machine's lines, above the block, are current: the block's lines go), "
        "'other' (the block's lines are current: they replace this machine's), 'both' (both facts hold: "
        "keep both, merged), 'ask' (you cannot tell: keep both and add a line asking the user which is "
        "right). A block whose words you drop without a decision makes memd reject the whole run."),
    "input_schema": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "the file, e.g. /memories/db.md"},
            "line": {"type": "integer", "description": "the line of the block's opening marker, as listed"},
            "decision": {"type": "string", "enum": list(cblock.CHOICES)},
            "reason": {"type": "string", "description": f"why, in one sentence (at most {MAX_REASON_CHARS} "
                                                        "characters)"},
        },
        "required": ["path", "line", "decision", "reason"],
    },
}


class Resolutions:
    """The decisions of one run, checked against the blocks the run found (``found``: file -> blocks)."""

    def __init__(self, found: Mapping[str, list[cblock.Block]]) -> None:
        self.found = {rel: list(bs) for rel, bs in found.items() if bs}
        self._said: dict[tuple[str, int], cblock.Resolution] = {}

    def resolutions(self) -> tuple[cblock.Resolution, ...]:
        return tuple(self._said.values())

    def handle(self, inp: Any) -> tuple[str, bool]:
        if not isinstance(inp, dict):
            return "Error: give path, line, decision and reason.", True
        if not self.found:
            return "Error: there is no sync conflict block in this memory folder.", True
        path, line = inp.get("path"), inp.get("line")
        decision, reason = inp.get("decision"), inp.get("reason")
        rel = path.removeprefix("/memories/") if isinstance(path, str) else ""
        if rel not in self.found:
            listed = ", ".join(f"/memories/{r}" for r in sorted(self.found)[:10])
            return f"Error: {str(path)[:80]!r} holds no conflict block; the files that do: {listed}.", True
        if isinstance(line, str) and line.strip().isdigit():
            line = int(line)
        block = next((b for b in self.found[rel] if b.line == line), None) if isinstance(line, int) else None
        if block is None:
            lines = ", ".join(str(b.line) for b in self.found[rel])
            return (f"Error: no block opens at line {str(line)[:20]} of /memories/{rel} as the run found it; "
                    f"its blocks open at line(s) {lines}.", True)
        if decision not in cblock.CHOICES:
            return f"Error: decision must be one of {', '.join(cblock.CHOICES)}.", True
        if not isinstance(reason, str) or not reason.strip():
            return "Error: give the reason for the decision, in one sentence.", True
        reason = " ".join(reason.split())[:MAX_REASON_CHARS]
        self._said[(rel, block.line)] = cblock.Resolution(rel, block.line, decision, reason)
        left = [f"/memories/{r}:{b.line}" for r, bs in sorted(self.found.items()) for b in bs
                if (r, b.line) not in self._said]
        return (f"Recorded for /memories/{rel}:{block.line} (from {block.machine}): "
                f"{cblock.CHOICES[decision]}. Make the edit if you have not: the block goes whole (both "
                "markers); a decision whose block is still in the file at the end is reported as left open."
                + (f" Blocks without a decision: {', '.join(left[:10])}." if left else ""), False)


def found_blocks(files: Mapping[str, bytes]) -> dict[str, list[cblock.Block]]:
    """The closed conflict blocks of a run's files (file -> blocks), team/ aside (never written)."""
    from memd.core.paths import is_team

    out: dict[str, list[cblock.Block]] = {}
    marker = cblock.BEGIN.encode()
    for rel, data in files.items():
        if is_team(rel) or marker not in data:
            continue
        bs = [b for b in cblock.blocks(data.decode("utf-8", "replace")) if b.end is not None]
        if bs:
            out[rel] = bs
    return out
