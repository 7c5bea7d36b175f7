"""Index rebuilds: the plan (pure) and the write (snapshot, atomic, no clobber, topic files untouched)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memd.config import BudgetConfig, Config
from memd.core import guard, index
from memd.core.files import FolderSnapshot
from memd.core.lint import lint
from memd.core.rebuild import NORMALISE, REPAIR, TopicInfo, plan_rebuild, shorten, topics_of
from memd.layout import Project
from memd.maintenance import rebuild_project
from tests.plugins.memory_folders import topic, write_tree


def tree_hash(folder: Path, skip: str = "") -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != skip}


def test_untouched_index_is_returned_byte_for_byte() -> None:
    text = "---\nx: 1\n---\n# Memory\r\n\n<!-- c -->\n- [A](a.md) — one  \n\n\n- [B](b.md)"
    plan = plan_rebuild(text, {"a.md": TopicInfo("a.md"), "b.md": TopicInfo("b.md")}, mode=NORMALISE)
    assert plan.text == text and not plan.changed and plan.fits and plan.actions == []


def test_shorten_cuts_at_a_word_boundary() -> None:
    line = "- [T](t.md) — " + " ".join(["word"] * 60)
    out = shorten(line, 150)
    assert out is not None and len(out) <= 150 and out.endswith("word…")
    assert shorten("- [T](" + "x" * 200 + ".md)", 150) is None


def test_plan_lints_clean_for_the_problems_it_fixes() -> None:
    texts = {
        "MEMORY.md": "# Memory\n\n## User\n- [A](user_a.md) — " + "long hook words " * 12 + "\n"
                     "- [Gone](gone.md) — x\n- [A again](user_a.md) — y\n",
        "user_a.md": topic("A", "first", "user"),
        "feedback_b.md": topic("B", "second", "feedback"),
    }
    snap = FolderSnapshot.from_texts(texts)
    plan = plan_rebuild(texts["MEMORY.md"], topics_of(snap), mode=NORMALISE)
    after = FolderSnapshot.from_texts({**texts, "MEMORY.md": plan.text})
    codes = {f.code for f in lint(after)}
    assert plan.fits and not codes & {"MEM004", "MEM005", "MEM010", "MEM011"}, plan.text


_title = st.text(alphabet="abc XYZ-_é😀[]", min_size=1, max_size=30)
_hook = st.text(alphabet="abc xyz,.—`é😀", max_size=220)


@st.composite
def _folder(draw: st.DrawFn) -> tuple[str, dict[str, TopicInfo]]:
    names = draw(st.lists(st.sampled_from([f"t{i}.md" for i in range(12)]), max_size=12, unique=True))
    topics = {n: TopicInfo(n, draw(st.one_of(st.none(), _title)), draw(st.one_of(st.none(), _hook)),
                           draw(st.sampled_from([None, "user", "feedback", "project", "reference"])))
              for n in names}
    lines: list[str] = []
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.integers(0, 5))
        target = draw(st.sampled_from([*names, "gone.md", "https://x.y/z", "../out.md"]))
        if kind == 0:
            lines.append(f"## {draw(st.sampled_from(['User', 'Feedback', 'Project notes', 'Misc']))}")
        elif kind == 1:
            lines.append(draw(st.sampled_from(["", "prose", "<!-- note -->", "  indented prose", "```", "~~~",
                                               "<!--", "-->", "---", "   ```py"])))
        else:
            lines.append(f"- [{draw(_title).replace(']', '')}]({target}) — {draw(_hook)}".rstrip())
    nl = draw(st.sampled_from(["\n", "\r\n"]))
    return nl.join(lines) + draw(st.sampled_from(["", nl])), topics


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(_folder(), st.integers(3, 60), st.integers(400, 6000))
def test_rebuild_fits_or_says_why_and_is_idempotent(case: tuple[str, dict[str, TopicInfo]],
                                                    max_lines: int, max_chars: int) -> None:
    text, topics = case
    b = BudgetConfig(max_lines=max_lines, max_chars=max_chars)
    plan = plan_rebuild(text, topics, b, mode=NORMALISE)
    again = plan_rebuild(plan.text, topics, b, mode=NORMALISE)
    assert again.text == plan.text and again.actions == []
    measured = index.measure(plan.text, b.max_lines, b.max_chars, b.warn_ratio)
    assert plan.fits == (measured.level != "over")
    if not plan.fits:
        assert plan.reasons and "cannot fit" in plan.reasons[0]
    # no live entry is ever dropped: every existing local target stays linked
    live_before = {e.file for e in index.parse(text).entries if e.file in topics}
    live_after = {e.file for e in index.parse(plan.text).entries}
    assert live_before <= live_after
    if "\r\n" in text:  # a CRLF file stays CRLF: no bare "\n" appears
        assert "\n" not in plan.text.replace("\r\n", "")


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(_folder(), st.integers(3, 60), st.integers(400, 6000))
def test_rebuild_never_drops_the_users_prose(case: tuple[str, dict[str, TopicInfo]], max_lines: int,
                                            max_chars: int) -> None:
    """Every non-entry line of the index (headings, notes, comments, fences) survives the rebuild:
    the guard's rule (``guard.lost_prose``) finds nothing lost, even when the plan does not fit."""
    text, topics = case
    plan = plan_rebuild(text, topics, BudgetConfig(max_lines=max_lines, max_chars=max_chars), mode=NORMALISE)
    assert guard.lost_prose(text, {"MEMORY.md": plan.text.encode()}) == []


def _as_files(text: str, topics: dict[str, TopicInfo]) -> dict[str, bytes]:
    """The folder as the guard sees it: the index and each topic file with its frontmatter."""
    out = {"MEMORY.md": text.encode()}
    for rel, t in topics.items():
        desc = " ".join((t.description or "").split()).replace('"', "'")
        name = " ".join((t.name or "x").split()).replace('"', "'")  # the file says what TopicInfo read from it
        out[rel] = f'---\nname: "{name}"\ndescription: "{desc}"\ntype: user\n---\n\nbody\n'.encode()
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(_folder(), st.integers(3, 60), st.integers(400, 6000), st.sampled_from([REPAIR, NORMALISE]))
def test_no_rebuild_drops_the_words_after_a_link(case: tuple[str, dict[str, TopicInfo]], max_lines: int,
                                                 max_chars: int, mode: str) -> None:
    """Neither mode drops the user's words after an entry's link (``guard.lost_notes``) unless it
    shortens the line (normalise only, and it says so); a repair drops none, fitting or not."""
    text, topics = case
    plan = plan_rebuild(text, topics, BudgetConfig(max_lines=max_lines, max_chars=max_chars), mode=mode)
    before = _as_files(text, topics)
    after = dict(before, **{"MEMORY.md": plan.text.encode()})
    lost = guard.lost_notes(text, before, after)
    if mode == REPAIR or not any(a.startswith("shortened") for a in plan.actions):
        assert lost == [], (lost, plan.actions)
    assert guard.lost_prose(text, after) == []


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(_folder())
def test_a_repair_within_the_budget_changes_only_broken_lines(case: tuple[str, dict[str, TopicInfo]]) -> None:
    """Within the budget a repair unlinks dangling entries and indexes orphans, nothing else: every
    line it keeps keeps its bytes, and an index with nothing broken comes back byte for byte."""
    text, topics = case
    plan = plan_rebuild(text, topics, BudgetConfig(), mode=REPAIR)
    if not plan.fits:
        return
    assert not any(a.startswith(("shortened", "merged")) for a in plan.actions), plan.actions
    if not plan.actions:
        assert plan.text == text
    kept = [ln for ln in text.splitlines() if ln in plan.text.splitlines()]
    removed = [ln for ln in text.splitlines() if ln not in plan.text.splitlines()]
    # a line that went is an entry whose file is gone (dropped, or kept as plain text)
    for ln in removed:
        m = index.ENTRY.match(ln)
        assert m is not None, ln
    assert len(kept) + len(removed) == len(text.splitlines())


# --------------------------------------------------------------------------- writing


@pytest.fixture
def project(tmp_path: Path) -> Project:
    mem = write_tree(tmp_path / "projects" / "-p" / "memory", {
        "MEMORY.md": "# Memory\n\n## User\n- [A](user_a.md) — first\n- [Gone](gone.md) — dangling\n",
        "user_a.md": topic("A", "first", "user"),
        "user_b.md": topic("B", "second", "user"),
        "team/MEMORY.md": "- [T](t.md)\n- [Gone](gone.md)\n",
        "team/t.md": topic("T", "team", "reference"),
        "team/orphan.md": topic("O", "team orphan", "reference"),
    })
    return Project("-p", mem.parent, mem)


def test_rebuild_writes_index_only_after_a_snapshot(project: Project, tmp_path: Path) -> None:
    before = tree_hash(project.memory_dir, skip="MEMORY.md")
    old = project.index_path.read_text()
    state = tmp_path / "state"
    res = rebuild_project(project, Config(), state, dry_run=False, mode=NORMALISE)
    assert res.written and res.fits and res.snapshot is not None
    new = project.index_path.read_text()
    assert "gone.md" not in new and "- [B](user_b.md) — second" in new and "team/" not in new
    assert tree_hash(project.memory_dir, skip="MEMORY.md") == before  # topic files and team/ untouched
    from memd import history

    snap = history.files_at(state, "-p", res.snapshot)  # the git-compatible history, outside the folder
    assert snap["MEMORY.md"].decode() == old and "team/t.md" in snap
    run = history.find_run(state, "-p", None)  # the rebuild is a run: listed, and undoable
    assert run.job == "rebuild" and run.before == res.snapshot
    assert res.diff.startswith("--- a/-p/MEMORY.md\n+++ b/-p/MEMORY.md\n") and "-- [Gone](gone.md)" in res.diff
    assert not [p for p in project.memory_dir.iterdir() if p.name.startswith(".memd-")]
    second = rebuild_project(project, Config(), state, dry_run=False, mode=NORMALISE)
    assert not second.written and second.diff == "" and second.fits
    undone = history.undo_run(state, "-p", project.memory_dir)
    assert undone.restored == ["MEMORY.md"] and project.index_path.read_text() == old


def test_dry_run_writes_nothing(project: Project, tmp_path: Path) -> None:
    before = tree_hash(project.memory_dir)
    res = rebuild_project(project, Config(), tmp_path / "state", dry_run=True, mode=NORMALISE)
    assert res.diff and not res.written and res.snapshot is None
    assert tree_hash(project.memory_dir) == before and not (tmp_path / "state").exists()


def test_refuses_to_clobber_a_concurrent_edit(project: Project, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from memd import history

    real = history.snapshot_before

    def edit_then_snapshot(*a: object, **k: object) -> str:
        project.index_path.write_text("# Edited by Claude Code meanwhile\n")
        return real(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(history, "snapshot_before", edit_then_snapshot)
    res = rebuild_project(project, Config(), tmp_path / "state", dry_run=False, mode=NORMALISE)
    assert not res.written and any("changed since it was read" in r for r in res.reasons)
    assert project.index_path.read_text() == "# Edited by Claude Code meanwhile\n"


def test_does_not_write_when_it_cannot_fit(project: Project, tmp_path: Path) -> None:
    cfg = Config(budget=BudgetConfig(max_lines=3))
    before = tree_hash(project.memory_dir)
    res = rebuild_project(project, cfg, tmp_path / "state", dry_run=False, mode=NORMALISE)
    assert not res.fits and not res.written and res.diff and "cannot fit" in res.reasons[0]
    assert tree_hash(project.memory_dir) == before


def test_symlinked_or_unreadable_index_is_left_alone(project: Project, tmp_path: Path) -> None:
    real = tmp_path / "elsewhere.md"
    real.write_text("- [A](user_a.md)\n")
    project.index_path.unlink()
    os.symlink(real, project.index_path)
    res = rebuild_project(project, Config(), tmp_path / "state", dry_run=False, mode=NORMALISE)
    assert not res.written and "symlink" in res.reasons[0]
    project.index_path.unlink()
    project.index_path.write_bytes(b"\xff\xfe not utf-8")
    res = rebuild_project(project, Config(), tmp_path / "state", dry_run=False, mode=NORMALISE)
    assert not res.written and "cannot be read" in res.reasons[0]


def test_missing_index_is_created(tmp_path: Path) -> None:
    mem = write_tree(tmp_path / "m" / "memory", {"user_a.md": topic("A", "first", "user")})
    res = rebuild_project(Project("-m", mem.parent, mem), Config(), tmp_path / "state", dry_run=False, mode=NORMALISE)
    assert res.written and (mem / "MEMORY.md").read_text() == "## User\n- [A](user_a.md) — first\n"


def test_case_insensitive_links_are_live_and_reported() -> None:
    texts = {"MEMORY.md": "- [Notes](Notes.md) — capitalised link\n- [Café](café.md) — NFD file\n",
             "notes.md": topic("Notes", "n", "user"), "cafe\u0301.md": topic("Café", "c", "user")}
    snap = FolderSnapshot.from_texts(texts)
    found = [(f.code, f.line) for f in lint(snap)]
    assert ("MEM009", 1) in found and ("MEM009", 2) in found
    assert not [c for c, _ in found if c in ("MEM005", "MEM010")]
    plan = plan_rebuild(texts["MEMORY.md"], topics_of(snap), mode=NORMALISE)
    assert plan.text == texts["MEMORY.md"] and not plan.actions  # nothing dropped, nothing re-added


def test_shortening_never_cuts_a_link_or_code_span_in_half() -> None:
    hook = "see [the deploy notes](deploy_notes_for_the_production_cluster.md) and `kubectl rollout status`"
    for pad in range(0, 80, 3):
        line = "- [T](t.md) — " + "w " * pad + hook + " tail words" * 5
        out = shorten(line, 150)
        assert out is not None and len(out) <= 150
        rest = out.split(" — ", 1)[1]
        assert rest.count("`") % 2 == 0
        assert rest.count("[") == rest.count("]") and rest.count("](") == rest.count(".md)")


def test_orphan_titles_and_odd_file_names() -> None:
    topics = {"a\\b [x].md": TopicInfo("a\\b [x].md", "back\\slash [y]", "d", "user"),
              "we<ird>.md": TopicInfo("we<ird>.md", None, None, "user")}
    plan = plan_rebuild(None, topics, mode=NORMALISE)
    entries = index.parse(plan.text).entries
    assert {e.file for e in entries} == set(topics)
    assert next(e.title for e in entries) == "back\\\\slash [y]"


def test_snapshot_is_a_history_commit_outside_the_folder(tmp_path: Path) -> None:
    from memd import history
    from memd.history import snapshot_before as snapshot

    mem = write_tree(tmp_path / "memory", {"MEMORY.md": "- [A](a.md)\n", "a.md": "a\n", "team/t.md": "t\n",
                                           ".memd-MEMORY.md.1.ab.tmp": "a half-written temp file\n"})
    os.symlink("/etc/hostname", mem / "out.md")
    before = tree_hash(mem)
    first = snapshot(tmp_path / "state", "-p", mem, "before rebuild/../x")
    second = snapshot(tmp_path / "state", "-p", mem, "before rebuild/../x")
    assert first != second and (tmp_path / "state" / "history" / "-p" / "HEAD").exists()
    files = history.files_at(tmp_path / "state", "-p", first)
    assert sorted(files) == ["MEMORY.md", "a.md", "team/t.md"]  # no temp file; the symlink never followed
    assert tree_hash(mem) == before  # nothing of memd's lands in the memory folder
    assert history.log(tmp_path / "state", "-p")[0].summary == "before before-rebuild-..-x"  # no path in it
