"""The guard's rule for sync's conflict blocks (issue 21 #3), model-based: a hypothesis state machine
edits a topic file holding blocks the way a model run might (a block resolved whole, one marker
dropped, a block's words dropped, a decision given or not, other lines edited) and after every step
the pure guard (``memd.core.guard.check`` with the run's decisions) must say exactly what a simple
model of the rule says, and ``memd.core.conflict.outcomes`` must report exactly the blocks resolved.

The rule: a block goes whole (both markers) or stays; a block may be removed, and its words may go,
only with the run's decision about that block.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from memd.core import conflict as cblock
from memd.core.guard import GuardLimits, check

STATES = ("open", "removed", "words_dropped", "start_gone", "end_gone")
INDEX = b"- [Database](db.md) - which database\n"
LIMITS = GuardLimits(max_shrink_share=1.0)  # only the block rule is under test


def render(blocks: list[dict[str, object]], extra: list[str]) -> str:
    out = ["---", "name: Database", "description: which database", "type: project", "---"]
    for i, b in enumerate(blocks):
        out.append(f"mine {i} alpha{i}")
        head, inner, end = cblock.begin_line(f"m{i}", "2026-12-01"), f"theirs {i} omega{i}", cblock.END
        state = b["state"]
        if state == "removed":
            continue
        if state != "start_gone":
            out.append(head)
        if state != "words_dropped":
            out.append(inner)
        if state != "end_gone":
            out.append(end)
    out += extra
    return "\n".join(out) + "\n"


class BlockRule(RuleBasedStateMachine):
    @initialize(n=st.integers(1, 4))
    def start(self, n: int) -> None:
        self.blocks: list[dict[str, object]] = [{"state": "open", "decided": False} for _ in range(n)]
        self.extra: list[str] = []
        self.before = render(self.blocks, [])
        self.lines = [b.line for b in cblock.blocks(self.before)]
        assert len(self.lines) == n

    @rule(i=st.integers(0, 3), state=st.sampled_from(STATES))
    def edit_block(self, i: int, state: str) -> None:
        if i < len(self.blocks):
            self.blocks[i]["state"] = state

    @rule(i=st.integers(0, 3))
    def decide(self, i: int) -> None:
        if i < len(self.blocks):
            self.blocks[i]["decided"] = True

    @precondition(lambda self: len(self.extra) < 3)
    @rule(text=st.sampled_from(["a new fact", "theirs 0 omega0 (moved here)", "mine 0 alpha0 again"]))
    def add_line(self, text: str) -> None:
        self.extra.append(text)

    def expected(self) -> tuple[bool, bool, bool]:
        """(the structure broken: a marker gone without its partner, a kept block's lines edited;
        a block removed whole without a decision; an undecided block's words lost)."""
        broken = any(b["state"] in ("start_gone", "end_gone", "words_dropped") for b in self.blocks)
        undecided = [i for i, b in enumerate(self.blocks) if not b["decided"]]
        removed = any(self.blocks[i]["state"] == "removed" for i in undecided)
        kept = "\n".join(self.extra)
        lost = any(self.blocks[i]["state"] in ("removed", "words_dropped") and f"theirs {i} omega{i}" not in kept
                   for i in undecided)
        return broken, removed, lost

    @invariant()
    def the_guard_agrees(self) -> None:
        if not hasattr(self, "blocks"):
            return
        after = render(self.blocks, self.extra)
        said = [cblock.Resolution("db.md", self.lines[i], "this", "newer")
                for i, b in enumerate(self.blocks) if b["decided"]]
        res = check({"MEMORY.md": INDEX, "db.md": self.before.encode()},
                    {"MEMORY.md": INDEX, "db.md": after.encode()}, LIMITS, resolved=said)
        broken, removed, lost = self.expected()
        got_broken = any("half-removed" in r or "changes the lines of a sync conflict block" in r for r in res.reasons)
        assert got_broken == broken, (res.reasons, self.blocks, self.extra)
        if not broken:  # a broken structure may also read as a removal or a loss; whole blocks say exactly
            got = (any("without saying what it decided" in r for r in res.reasons),
                   any("drops words of a sync conflict block" in r for r in res.reasons))
            assert got == (removed, lost), (res.reasons, self.blocks, self.extra)
        assert res.passed == (not (broken or removed or lost)), res.reasons
        if res.passed:
            outs = cblock.outcomes({"db.md": self.before}, {"db.md": after}, said)
            resolved = {o.line for o in outs if o.resolved}
            assert resolved == {self.lines[i] for i, b in enumerate(self.blocks)
                                if b["decided"] and b["state"] == "removed"}, (outs, self.blocks)
            assert {o.machine for o in outs} == {f"m{i}" for i in range(len(self.blocks))}

    @invariant()
    def a_writer_whose_changes_are_the_user_s_is_not_judged(self) -> None:
        """Sync (no decisions: ``resolved=None``) carries another machine's edits of a block as they are."""
        if not hasattr(self, "blocks"):
            return
        after = render(self.blocks, self.extra)
        res = check({"MEMORY.md": INDEX, "db.md": self.before.encode()},
                    {"MEMORY.md": INDEX, "db.md": after.encode()}, LIMITS)
        assert res.passed, res.reasons


TestBlockRule = BlockRule.TestCase
TestBlockRule.settings = settings(max_examples=150, stateful_step_count=12, deadline=None)
