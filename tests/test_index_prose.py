"""Index prose is the user's own text (issue 11, finding 1): a run may move it into a topic file and
link it, never drop it; and a summary that says ``+0 ~0 -0`` changed nothing, byte for byte."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from memd import apply as ap
from memd.config import Config
from memd.core import guard
from memd.core.paths import INDEX_NAME
from memd.core.rebuild import NORMALISE
from memd.layout import Project
from tests.conftest import claude_data_source

REAL = "projects/-home-dev-application-pipeline/memory"


@pytest.fixture
def real(tmp_path: Path) -> Project:
    """A copy of the real 55-file memory folder of ../shared/claude-data."""
    src = claude_data_source()
    if src is None or not (src / REAL).is_dir():
        pytest.skip("../shared/claude-data is not here (a user's clone)")
    d = tmp_path / "projects" / "-p"
    shutil.copytree(src / REAL, d / "memory")
    for p in (d / "memory").rglob("*"):
        p.chmod(0o644 if p.is_file() else 0o755)
    return Project("-p", d, d / "memory")


def _dropped(text: str, n: int) -> tuple[str, list[str]]:
    """``text`` less its first ``n`` prose bullets (notes the user wrote straight into the index)."""
    gone = [ln for ln in guard.index_prose(text) if ln.startswith("- ")][:n]
    lines = text.split("\n")
    for ln in gone:
        lines.remove(ln)
    return "\n".join(lines), gone


def _run(project: Project, tmp_path: Path, edit: Callable[[ap.Workspace], ap.Edits]) -> ap.RunResult:
    return ap.run(project, edit, state_dir=tmp_path / "state", job="dream", run_id="dream-1", config=Config(),
                  review=False)


def test_a_dream_that_drops_fifteen_prose_lines_of_the_real_index_is_rejected(real: Project, tmp_path: Path) -> None:
    before = {p.name: p.read_bytes() for p in real.memory_dir.iterdir() if p.is_file()}
    assert len(before) == 55

    def dream(ws: ap.Workspace) -> ap.Edits:
        idx = ws.get().root / INDEX_NAME
        idx.write_text(_dropped(idx.read_text(), 15)[0])
        return ap.Edits("tidied the index", model_called=True)

    res = _run(real, tmp_path, dream)
    assert res.verdict is ap.Verdict.REJECTED, res
    _, gone = _dropped(before[INDEX_NAME].decode(), 15)
    chars = sum(len(ln.strip()) for ln in gone)
    assert any(f"(15 lines, {chars:,} characters)" in r and 'first: "- When listing pipeline entries' in r
               for r in res.reasons), res.reasons
    assert {p.name: p.read_bytes() for p in real.memory_dir.iterdir() if p.is_file()} == before


def test_the_same_lines_moved_into_a_linked_topic_file_are_applied(real: Project, tmp_path: Path) -> None:
    def dream(ws: ap.Workspace) -> ap.Edits:
        root = ws.get().root
        text, gone = _dropped((root / INDEX_NAME).read_text(), 15)
        (root / INDEX_NAME).write_text(text.rstrip("\n") + "\n- [Working notes](project_working_notes.md)"
                                       " — where batches go, market data, metrics\n")
        (root / "project_working_notes.md").write_text(
            "---\nname: Working notes\ndescription: where batches go, market data, metrics\ntype: project\n"
            "---\n" + "\n".join(gone) + "\n")
        return ap.Edits("moved the index notes into a topic", model_called=True)

    res = _run(real, tmp_path, dream)
    assert res.verdict is ap.Verdict.APPLIED, res.reasons
    moved = (real.memory_dir / "project_working_notes.md").read_text()
    assert "Resume batches go to" in moved
    assert "(project_working_notes.md)" in (real.memory_dir / INDEX_NAME).read_text()


def test_the_deterministic_rebuild_of_the_real_index_keeps_every_prose_line(real: Project) -> None:
    from memd.core.files import FolderSnapshot
    from memd.core.rebuild import plan_rebuild, topics_of

    snap = FolderSnapshot.from_texts({p.name: p.read_text() for p in real.memory_dir.iterdir() if p.is_file()})
    text = (real.memory_dir / INDEX_NAME).read_text()
    plan = plan_rebuild(text, topics_of(snap), mode=NORMALISE)
    assert len(guard.index_prose(text)) > 30
    assert guard.lost_prose(text, {INDEX_NAME: plan.text.encode()}) == []


# --------------------------------------------------------------------------- honest summaries


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_run_that_changes_only_the_index_prose_does_not_say_it_changed_nothing(tmp_path: Path) -> None:
    from memd.jobs import ProjectOutcome
    from memd.jobs.modelrun import record

    d = tmp_path / "projects" / "-p"
    (d / "memory").mkdir(parents=True)
    (d / "memory" / INDEX_NAME).write_text("# Memory\n\n## Feedback\n- [Tabs](feedback_tabs.md) — indent with tabs\n")
    (d / "memory" / "feedback_tabs.md").write_text(
        "---\nname: Tabs\ndescription: indent with tabs\ntype: feedback\n---\nUse tabs.\n")
    project = Project("-p", d, d / "memory")
    before = _tree(project.memory_dir)

    def dream(ws: ap.Workspace) -> ap.Edits:
        idx = ws.get().root / INDEX_NAME
        idx.write_text(idx.read_text().replace("## Feedback\n", "## Feedback\nRules the user gave, newest last.\n"))
        return ap.Edits("noted", model_called=True)

    res = _run(project, tmp_path, dream)
    assert res.verdict is ap.Verdict.APPLIED, res.reasons
    assert res.summary == "+0 ~1 -0 (index updated) - noted"
    after = _tree(project.memory_dir)
    # the counts cover exactly the files whose bytes differ
    assert {r for r in before.keys() | after.keys() if before.get(r) != after.get(r)} == \
        set(res.added + res.changed + res.deleted) == {INDEX_NAME}
    out = ProjectOutcome("-p", "failed")
    record(out, res)  # what the run log and `memd dream` print: "ok (+0 ~1 -0)"
    assert (out.outcome, out.added, out.changed, out.deleted) == ("changed", 0, 1, 0)


def test_summaries_count_every_file_the_index_included() -> None:
    def ch(rel: str, kind: str) -> guard.Change:
        return guard.Change(rel, kind, None if kind == "added" else b"a", None if kind == "deleted" else b"b")

    assert ap.summarize([]) == "+0 ~0 -0"
    assert ap.summarize([ch(INDEX_NAME, "changed")]) == "+0 ~1 -0 (index updated)"
    assert ap.summarize([ch(INDEX_NAME, "added"), ch("user_a.md", "added")], "first") == \
        "+2 ~0 -0 (index written) - first"
    assert ap.summarize([ch(INDEX_NAME, "deleted"), ch("user_a.md", "changed")]) == "+0 ~1 -1 (index deleted)"
