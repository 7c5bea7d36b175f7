"""Issue 33 findings 1-3: an index sync settles. No sync shortens an index to fit the budget (over budget
after a merge is a warning, never a refusal), a held file is never pushed, the project converges (no
flip-flop commits), and the same MEMORY.md line edited differently on two machines is a visible
conflict on both. Two machines and a real bare remote over file://; the over-budget folder is a copy of
a real one from ../shared/claude-data made as long as the issue's (249 lines, 27,756 characters), and a
synthetic one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memd.core import index as mindex
from memd.sync import gitremote, held
from tests.conftest import ROOT, claude_data_source
from tests.plugins.sync import Machine, topic

BRANCH = "memory/github.com/me/app"
REAL = "projects/-home-dev-application-pipeline/memory"
LINES, CHARS = 249, 27_756  # the real index


def remote_head(m: Machine) -> tuple[str | None, int, dict[str, bytes]]:
    """The remote branch's head, its number of commits and its files, as a fresh fetch of m sees them."""
    gitremote.fetch(m.state_dir, m.config.sync.remote, timeout=30)
    repo = gitremote.open_repo(m.state_dir)
    try:
        head = gitremote.heads(repo, BRANCH).remote
        if head is None:
            return None, 0, {}
        n = sum(1 for _ in repo.get_walker(include=[head.encode()]))
        return head, n, gitremote.files_of(repo, head, 10**6).files
    finally:
        repo.close()


def _shape(lines: list[str], files: dict[str, str], start: int) -> tuple[str, dict[str, str]]:
    """``lines`` grown to the issue's index: entries with the user's words after the link (each a new
    topic file) until it has as many entries as the issue's (108), then prose; the last line sized so the
    whole is exactly LINES lines and CHARS characters."""
    n = start
    entries = sum(1 for ln in lines if ln.startswith("- ["))
    if "## Later notes" not in lines:
        lines += ["", "## Later notes"]
    while len(lines) < LINES - 1:
        if entries < 108:
            rel = f"project_later_{n:03d}.md"
            files[rel] = topic(f"later {n}", f"Later fact {n}: the staging cluster {n} is rebuilt nightly.\n")
            lines.append(f"- [Later {n}]({rel}) — the user's own words on cluster {n}: rebuilt nightly, ask Dana "
                         f"before touching it")
            entries += 1
        else:
            lines.append(f"- note {n}: the retro said the pipeline {n} keeps its own calendar, owned by ops")
        n += 1
    body = "\n".join(lines) + "\n"
    room = CHARS - len(body) - 1
    assert room > 20, room  # the pieces above stay short enough to size the last line
    last = ("Last: " + "the held-out index keeps growing past what a session loads. " * 400)[:room].rstrip()
    last += "." * (room - len(last))
    text = body + last + "\n"
    assert (text.count("\n"), len(text)) == (LINES, CHARS)
    return text, files


def real_shaped(dst: Path) -> Path:
    """A copy of the real folder (``../shared/claude-data``) with its index grown to the issue's size."""
    # the shared data beside the checkout (conftest), or beside the worktrees' folder (a worktree of it)
    src = claude_data_source() or next((p for p in [ROOT.parent.parent / "shared" / "claude-data"] if p.is_dir()),
                                       None)
    if src is None or not (src / REAL).is_dir():
        pytest.skip("../shared/claude-data is not here (a user's clone)")
    shutil.copytree(src / REAL, dst)
    lines = (dst / "MEMORY.md").read_text(encoding="utf-8").rstrip("\n").split("\n")
    text, files = _shape(lines, {}, 0)
    for rel, body in files.items():
        (dst / rel).write_text(body, encoding="utf-8")
    (dst / "MEMORY.md").write_text(text, encoding="utf-8")
    return dst


def synthetic_shaped(dst: Path) -> Path:
    dst.mkdir(parents=True)
    files: dict[str, str] = {}
    lines = ["# Project memory", "", "## Feedback"]
    for i in range(40):
        rel = f"feedback_rule_{i:02d}.md"
        files[rel] = topic(f"rule {i}", f"Rule {i}: keep the deploy script idempotent.\n", typ="feedback")
        lines.append(f"- [Rule {i}]({rel}) — my words: rule {i} came from the outage of 2026-0{1 + i % 9}-1{i % 10}")
    text, files = _shape(lines, files, 100)
    for rel, body in files.items():
        (dst / rel).write_text(body, encoding="utf-8")
    (dst / "MEMORY.md").write_text(text, encoding="utf-8")
    return dst


def seeded(a: Machine, folder: Path) -> None:
    for p in sorted(folder.rglob("*.md")):
        a.write(str(p.relative_to(folder)), p.read_text(encoding="utf-8"))


def settled(machines: list[Machine], rounds: int = 2) -> tuple[str | None, int]:
    """Sync each machine in turn until two rounds in a row make no commit; returns the head and count."""
    head, n, _ = remote_head(machines[0])
    quiet = 0
    for _ in range(8):
        for m in machines:
            m.sync("app")
        now, count, _ = remote_head(machines[0])
        quiet = quiet + 1 if now == head else 0
        head, n = now, count
        if quiet >= rounds:
            return head, n
    raise AssertionError(f"still committing after 8 rounds ({n} commits)")


@pytest.mark.parametrize("shape", [real_shaped, synthetic_shaped])
def test_an_over_budget_index_is_never_shortened_and_settles(machines: Any, tmp_path: Path, shape: Any) -> None:
    """Finding 1: the second machine's first sync wrote a 200-line index lacking ~1,900 of the index's
    words (withdrawn to fit the budget); each machine then held the other's MEMORY.md and the remote's
    flipped 249 -> 200 -> 249 for good. Failed before the fix (b's index was cut)."""
    a, b = machines("ma"), machines("mb")
    seeded(a, shape(tmp_path / "folder"))
    index = a.read("MEMORY.md") or ""
    assert mindex.measure(index, 200, 25_000, 0.8).level == "over"
    assert a.outcome("app").outcome in ("changed", "unchanged")
    out = b.outcome("app")
    assert out.outcome == "changed", out
    assert b.read("MEMORY.md") == index  # nothing shortened, nothing condensed: every word is here
    assert a.read("MEMORY.md") == index
    head, n = settled([a, b])
    assert remote_head(a)[2]["MEMORY.md"].decode() == index
    for m in (a, b):
        assert held.status_lines(m.state_dir) == "", held.status_lines(m.state_dir)
    # the settled project stays settled: another round commits nothing
    a.sync("app")
    b.sync("app")
    assert remote_head(a)[:2] == (head, n)


def test_a_held_index_is_never_pushed(machines: Any, tmp_path: Path) -> None:
    """Finding 1: a machine holding the remote's MEMORY.md pushed its own over it at every sync (the docs
    say a push carries a held file unchanged), so the remote's index flipped between the two versions
    for good. Failed before the fix (the remote's index became b's)."""
    a, b = machines("ma"), machines("mb")
    seeded(a, synthetic_shaped(tmp_path / "folder"))
    a.sync("app")
    b.sync("app")
    full = a.read("MEMORY.md") or ""
    # another machine's older memd cut every entry's hook to fit the budget, and pushed it
    cut = "".join(ln.split(" — ")[0] + "\n" if ln.startswith("- [") else ln + "\n" for ln in full.splitlines())
    a.write("MEMORY.md", cut)
    a.write("feedback_rule_03.md", topic("rule 3", "Rule 3: keep the deploy script idempotent, and logged.\n",
                                         typ="feedback"))
    a.sync("app")
    out = b.outcome("app")
    assert "MEMORY.md" in held.load(b.state_dir, b.project().name).files, out
    assert b.read("MEMORY.md") == full
    assert "and logged" in (b.read("feedback_rule_03.md") or "")  # held file by file: the topic edit travels
    line = held.status_lines(b.state_dir)
    assert "MEMORY.md" in line and "--keep-local" in line, line
    settled([a, b])
    assert remote_head(a)[2]["MEMORY.md"].decode() == cut  # b's held version never went out
    assert a.read("MEMORY.md") == cut and b.read("MEMORY.md") == full
    # the documented resolution: b's version goes out, a takes it (it adds words), and it settles
    out = b.outcome("app", keep_local=True)
    assert "sent" in out.message, out
    settled([a, b])
    assert a.read("MEMORY.md") == full == b.read("MEMORY.md")
    assert held.status_lines(b.state_dir) == "" and held.status_lines(a.state_dir) == ""


# --------------------------------------------------------------------------- finding 2


def _index_of(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


def status(m: Machine, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """`memd status`'s sync lines on m, through the command."""
    from tests.test_sync_command import run

    return [ln for ln in run(m, tmp_path, capsys, "status").splitlines() if ln.startswith("sync: ")]


@pytest.mark.parametrize("shape", ["lines", "chars"])
def test_edits_whose_union_passes_the_budget_merge_and_warn(machines: Any, shape: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Finding 2: each machine edits different lines of an index near its budget (196 lines, or 71 long
    lines) and one topic file; neither machine's index is over, only their merge. The receiver was
    refused whole on every sync ("MEMORY.md is over its budget (211 lines ...)"), so the unrelated topic
    edit never travelled either, the sender said "nothing new" with no status line, and the suggested
    `--forget` changed nothing. Now the merge applies on both (every line of both kept, the topic edits
    travel), both status say the index is over and how to resolve it, and a condensed index settles it.
    Failed before the fix (b refused the merge)."""
    a, b = machines("ma"), machines("mb")
    a.write("deploy.md", topic("deploy", "Deploys go out on Tuesdays.\n"))
    a.write("db.md", topic("db", "The database is Postgres 16.\n"))
    if shape == "lines":
        lines = ["# Memory", "", "- [Deploy](deploy.md) — Tuesdays", "- [Db](db.md) — Postgres 16"]
        lines += [f"- note {i}: the staging host {i} is rebuilt every night at 02:00" for i in range(192)]
    else:
        lines = ["# Memory", "", "- [Deploy](deploy.md) — Tuesdays", "- [Db](db.md) — Postgres 16"]
        lines += [(f"- note {i}: " + f"the staging host {i} is rebuilt every night, ask ops first; " * 6)[:338]
                  for i in range(67)]  # 71 lines, 23,000 characters
    a.write("MEMORY.md", _index_of(lines))
    a.sync("app")
    b.sync("app")
    assert b.read("MEMORY.md") == a.read("MEMORY.md")
    mine, theirs = list(lines), list(lines)
    if shape == "lines":  # each machine corrects 12 lines and adds 3 or 4: 199 and 200 lines, 203 merged
        for i in range(12):
            mine[10 + i] = mine[10 + i].replace("every night", "every night (on a)")
            theirs[100 + i] = theirs[100 + i].replace("every night", "every night (on b)")
        mine += [f"- added on a {i}: the new queue {i} drains hourly" for i in range(3)]
        theirs[50:50] = [f"- added on b {i}: the old queue {i} drains daily" for i in range(4)]
    else:  # each machine lengthens 16 lines: each index is under 25,000 characters, the merge is not
        for i in range(16):
            mine[10 + i] += " (on a: the host moved to rack 12, the night job to 03:00, Dana owns it)"
            theirs[40 + i] += " (on b: the host moved to rack 14, the night job to 04:00, Sam owns it now)"
    for m, text in ((a, mine), (b, theirs)):
        m.write("MEMORY.md", _index_of(text))
        assert mindex.measure(_index_of(text), 200, 25_000, 0.8).level != "over"
    a.write("deploy.md", topic("deploy", "Deploys go out on Tuesdays and Thursdays.\n"))
    b.write("db.md", topic("db", "The database is Postgres 16, upgraded in November.\n"))
    a.sync("app")
    out = b.outcome("app")
    assert out.outcome == "changed", out  # nothing refused: the merge is applied
    assert "Thursdays" in (b.read("deploy.md") or "")  # the unrelated topic edit travelled
    merged = b.read("MEMORY.md") or ""
    assert mindex.measure(merged, 200, 25_000, 0.8).level == "over"
    new = (set(mine) | set(theirs)) - set(lines)
    kept = set(lines) & set(mine) & set(theirs)
    assert new | kept <= set(merged.splitlines())  # every line of both machines, their edits as edits
    a.sync("app")
    assert a.read("MEMORY.md") == merged and "November" in (a.read("db.md") or "")
    settled([a, b])
    for m in (a, b):
        assert held.status_lines(m.state_dir) == "", held.status_lines(m.state_dir)
        (line,) = status(m, tmp_path, capsys)
        name = m.project().name
        assert line.startswith(f"sync: {name}: MEMORY.md is over its budget") and "nothing is held" in line \
            and f"resolve: condense it (`memd dream {name}`" in line, line
        from tests.test_sync_command import run

        doc = json.loads(run(m, tmp_path, capsys, "status", "--format", "json"))
        assert line in doc["sync"]["lines"], doc["sync"]
    # the resolution the line names: the index condensed (here by hand on b); it reaches a, both settle
    b.write("MEMORY.md", _index_of([ln for ln in merged.splitlines() if "staging host 1" not in ln]))
    settled([a, b])
    assert a.read("MEMORY.md") == b.read("MEMORY.md")
    assert mindex.measure(a.read("MEMORY.md") or "", 200, 25_000, 0.8).level != "over"
    assert status(a, tmp_path, capsys) == status(b, tmp_path, capsys) == []


# --------------------------------------------------------------------------- finding 3


def test_one_index_line_edited_on_both_machines_is_a_marked_conflict(machines: Any, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Finding 3: the same MEMORY.md line edited differently on two machines ended as two plain adjacent
    lines (two entries for one file) with no block, no record, no status line. Now it is a conflict block
    on both machines (its markers are comments Claude Code strips, both lines load), `memd check` names it
    (MEM090), status counts it, the dream gets it as evidence, and resolving it on one machine settles it
    on both. Failed before the fix (no block)."""
    from memd.core import conflict as cblock
    from memd.core.files import FolderSnapshot
    from memd.core.lint import lint
    from memd.sync import evidence

    a, b = machines("ma"), machines("mb")
    a.write("db.md", topic("db", "The database.\n"))
    a.write("deploy.md", topic("deploy", "Deploys.\n"))
    base = "# Memory\n\n- [Database](db.md) — SQLite (the default)\n- [Deploy](deploy.md) — Tuesdays\n"
    a.write("MEMORY.md", base)
    a.sync("app")
    b.sync("app")
    pg = "- [Database](db.md) — Postgres 16 (moved in November)"
    lite = "- [Database](db.md) — SQLite (kept for the CI runs)"
    a.write("MEMORY.md", base.replace("- [Database](db.md) — SQLite (the default)", pg))
    b.write("MEMORY.md", base.replace("- [Database](db.md) — SQLite (the default)", lite))
    a.sync("app")
    b.sync("app")
    a.sync("app")
    idx = b.read("MEMORY.md") or ""
    assert a.read("MEMORY.md") == idx
    lines = idx.splitlines()
    blocks = cblock.blocks(idx)
    assert len(blocks) == 1 and blocks[0].machine == "ma" and blocks[0].end is not None, idx
    assert lines.index(lite) < blocks[0].line - 1 < lines.index(pg) < blocks[0].end - 1, idx
    seen = mindex.loaded_view(idx).text
    assert pg in seen and lite in seen and "memd sync conflict" not in seen  # markers stripped, both load
    for m in (a, b):
        found = [f for f in lint(FolderSnapshot.from_texts({"MEMORY.md": m.read("MEMORY.md") or "",
                                                            "db.md": topic("db", "x\n"),
                                                            "deploy.md": topic("deploy", "x\n")}))
                 if f.code == "MEM090"]
        assert [(f.path, f.line) for f in found] == [("MEMORY.md", blocks[0].line)], found
    rows = evidence.open_conflicts(b.state_dir, b.project().name)
    assert [r.file for r in rows] == ["MEMORY.md"] and "Postgres 16" in rows[0].remote, rows
    text, ids = evidence.for_dream(b.state_dir, b.project().name)
    assert "MEMORY.md" in text and "Postgres 16" in text and ids
    for m in (a, b):  # both machines' status name the block; the one that met it, the evidence too
        lines = status(m, tmp_path, capsys)
        assert any("1 conflict block(s) in memory files" in ln and m.project().name in ln for ln in lines), lines
        assert any("conflict(s) between machines kept for the next dream" in ln for ln in lines) == (m is b), lines
    # resolved by hand on a (Postgres kept, the block gone): b takes the resolution, nothing held
    a.write("MEMORY.md", base.replace("- [Database](db.md) — SQLite (the default)", pg))
    a.sync("app")
    out = b.outcome("app")
    assert out.outcome == "changed", (out, held.status_lines(b.state_dir))
    settled([a, b])
    assert a.read("MEMORY.md") == b.read("MEMORY.md") == base.replace("- [Database](db.md) — SQLite (the default)",
                                                                        pg)
    assert held.status_lines(a.state_dir) == held.status_lines(b.state_dir) == ""


def test_lines_only_added_on_both_machines_stay_plain() -> None:
    """Two machines adding different lines at one place is no conflict: both stay, no block."""
    from memd.sync.merge import merge_index_blocks

    base = "# Memory\n\n- [Deploy](deploy.md) — Tuesdays\n"
    out, blocked = merge_index_blocks(base, base + "- one from here\n", base + "- one from there\n", machine="mb")
    assert not blocked and out == base + "- one from here\n- one from there\n", out


def test_the_other_sides_block_is_made_anew_not_nested() -> None:
    """A machine merging the other's merged index (its own line already inside the other's block) ends with
    one block holding the other's line: markers are never copied, so no block nests in another."""
    from memd.core import conflict as cblock
    from memd.sync.merge import merge_index_blocks

    base = "# Memory\n\n- [Db](db.md) — SQLite\n- [Deploy](deploy.md) — Tuesdays\n"
    a = base.replace("SQLite", "Postgres 16")
    b = base.replace("SQLite", "SQLite 3.45")
    on_b, blocked = merge_index_blocks(base, b, a, machine="ma", date="2026-12-03")
    assert blocked and on_b is not None and cblock.count(on_b) == 1
    on_a, blocked = merge_index_blocks(base, a, on_b, machine="mb", date="2026-12-03")
    assert blocked and on_a is not None and cblock.count(on_a) == 1, on_a
    lines = on_a.splitlines()
    assert lines[2] == "- [Db](db.md) — Postgres 16" and lines[4] == "- [Db](db.md) — SQLite 3.45", on_a
    assert cblock.is_begin(lines[3]) and "from mb" in lines[3] and cblock.is_end(lines[5]), on_a


POOL = [f"- line {i}: a fact" for i in range(8)]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(base=st.lists(st.sampled_from(POOL), max_size=6, unique=True),
       edits=st.lists(st.tuples(st.integers(0, 7), st.sampled_from(["keep", "drop", "edit"])), min_size=2,
                      max_size=12))
def test_the_index_merge_loses_no_new_line_and_makes_one_block_per_edit(base: list[str],
                                                                       edits: list[tuple[int, str]]) -> None:
    """Any two edits of an index: every line new on either side is in the merge (in a block or not), no
    marker is left unpaired, and a line both sides kept stays."""
    from memd.core import conflict as cblock
    from memd.sync.merge import merge_index_blocks

    half = len(edits) // 2
    sides = []
    for k, part in enumerate((edits[:half], edits[half:])):
        lines = list(base)
        for i, what in part:
            if not lines:
                break
            at = i % len(lines)
            if what == "drop":
                del lines[at]
            elif what == "edit":
                lines[at] = lines[at] + f" (edited on {k})"
        sides.append(lines)
    text = [("\n".join(x) + "\n") if x else "" for x in (base, *sides)]
    out, _ = merge_index_blocks(text[0], text[1], text[2], machine="mb", date="2026-12-03")
    got = (out or "").splitlines()
    for lines in sides:
        assert set(lines) - set(base) <= set(got), (text, out)
    assert set(base) & set(sides[0]) & set(sides[1]) <= set(got), (text, out)
    assert all(b.end is not None for b in cblock.blocks(out or "")), out
