"""Issue 21 findings 4 and 5: MEMORY.md merges three-way by line against the shared base (edits and
deletions stick), and a sync writes only the index lines it must."""

from __future__ import annotations

from typing import Any

from memd.sync.merge import merge_index
from tests.plugins.sync import topic

BASE = "# Memory\n\nAlways use tabs.\nAsk before touching prod.\nThe wiki is stale.\n\n- [x](x.md) — about x\n"


def test_an_edited_line_replaces_the_old_one() -> None:
    remote = BASE.replace("Always use tabs.", "Always use 4 spaces.")
    out = merge_index(BASE, BASE, remote) or ""
    assert "Always use 4 spaces." in out and "Always use tabs." not in out, out


def test_a_removed_line_stays_removed() -> None:
    remote = BASE.replace("The wiki is stale.\n", "")
    assert "wiki" not in (merge_index(BASE, BASE, remote) or "")


def test_edits_on_both_sides_merge() -> None:
    local = BASE.replace("Ask before touching prod.", "Ask Dana before touching prod.")
    remote = BASE.replace("The wiki is stale.\n", "")
    out = merge_index(BASE, local, remote) or ""
    assert "Ask Dana before touching prod." in out and "wiki" not in out and "Always use tabs." in out, out


def test_a_true_conflict_keeps_both_sides_words() -> None:
    local = BASE.replace("Always use tabs.", "Always use 2 spaces.")
    remote = BASE.replace("Always use tabs.", "Always use 4 spaces.")
    out = merge_index(BASE, local, remote) or ""
    assert "Always use 2 spaces." in out and "Always use 4 spaces." in out, out


def test_corrections_stick_between_machines(machines: Any) -> None:
    a, b = machines("ma"), machines("mb")
    a.write("x.md", topic("x", "x\n"))
    a.write("MEMORY.md", BASE)
    a.sync("app")
    b.sync("app")
    a.write("MEMORY.md", (a.read("MEMORY.md") or "").replace("Always use tabs.", "Always use 4 spaces.")
            .replace("The wiki is stale.\n", ""))
    a.sync("app")
    b.sync("app")
    a.sync("app")
    for m in (a, b):
        idx = m.read("MEMORY.md") or ""
        assert "Always use 4 spaces." in idx and "tabs" not in idx and "wiki" not in idx, (m.name, idx)


def test_a_sync_writes_only_the_index_lines_it_must(machines: Any) -> None:
    """Finding 5: one incoming file changes no entry line it does not concern (main already held this
    through apply.finalize's REPAIR rebuild; pinned here with user-worded entries)."""
    a, b = machines("ma"), machines("mb")
    lines = ["# Memory", ""]
    for i in range(40):
        a.write(f"t{i}.md", topic(f"t{i}", f"fact {i}\n"))
        lines.append(f"- [t{i}](t{i}.md) - my own words about t{i}, longer than the description would be")
    a.write("MEMORY.md", "\n".join(lines) + "\n")
    a.sync("app")
    b.sync("app")
    before = (b.read("MEMORY.md") or "").splitlines()
    a.write("t7.md", topic("t7", "fact 7, now corrected\n"))
    a.write("new.md", topic("new", "a new one\n"))
    a.sync("app")
    b.sync("app")
    after = (b.read("MEMORY.md") or "").splitlines()
    gone = [ln for ln in before if ln not in after]
    added = [ln for ln in after if ln not in before]
    # nothing rewritten: the new file's entry (under a heading of its type, REPAIR's placement) is all
    assert gone == [] and [ln for ln in added if not ln.startswith("#")] == ["- [new](new.md) — about new"], added
