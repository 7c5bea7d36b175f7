"""``memd.apply.run``: the whole pipeline in one call, with the model's part as a callback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memd import apply as ap
from memd import history
from memd.config import Config
from memd.layout import Project
from memd.llm.client import Usage

SECRET_URL = "postgres://app:Sup3rS3cret@db.internal:5432/app"


def topic(name: str, desc: str, body: str, type_: str = "feedback") -> str:
    return f"---\nname: {name}\ndescription: {desc}\ntype: {type_}\n---\n{body}\n"


@pytest.fixture
def project(tmp_path: Path) -> Project:
    d = tmp_path / "projects" / "-p"
    (d / "memory").mkdir(parents=True)
    (d / "memory" / "MEMORY.md").write_text("- [Tabs](feedback_tabs.md) — indent with tabs\n")
    (d / "memory" / "feedback_tabs.md").write_text(topic("Tabs", "indent with tabs", "Use tabs."))
    return Project("-p", d, d / "memory")


def tree(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def run(project: Project, tmp_path: Path, edit: Any, *, review: bool = False, log: Any = None) -> ap.RunResult:
    return ap.run(project, edit, state_dir=tmp_path / "state", job="dream", run_id="dream-1", config=Config(),
                  review=review, log=log)


def staging_left(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "state" / "staging" / "-p"
    return list(folder.iterdir()) if folder.is_dir() else []


def write_new(ws: ap.Workspace) -> ap.Edits:
    st = ws.get()
    (st.root / "user_lang.md").write_text(topic("Language", "answer in French", "Answer in French.", "user"))
    return ap.Edits("saved one", model_called=True, usage=Usage(calls=1))


def test_applied(project: Project, tmp_path: Path) -> None:
    res = run(project, tmp_path, write_new)
    assert res.verdict is ap.Verdict.APPLIED and res.staged and res.model_called and res.usage == Usage(calls=1)
    assert (res.added, res.changed, res.deleted, res.index_updated) == (("user_lang.md",), ("MEMORY.md",), (), True)
    assert res.summary == "+1 ~1 -0 (index updated) - saved one" and res.changed_anything
    assert res.history and history.list_runs(tmp_path / "state", "-p")[0].run == "dream-1"
    assert "(user_lang.md)" in (project.memory_dir / "MEMORY.md").read_text()
    assert res.rebuild and not staging_left(tmp_path)


def test_review_keeps_the_diff_and_changes_nothing(project: Project, tmp_path: Path) -> None:
    before = tree(project.memory_dir)
    res = run(project, tmp_path, write_new, review=True)
    assert res.verdict is ap.Verdict.REVIEW and res.added == ("user_lang.md",) and not res.history
    assert res.review_path is not None and res.review_path.read_text().startswith("# dream dream-1: +1 ~1 -0")
    assert "+Answer in French." in res.diff and tree(project.memory_dir) == before


def test_rejected_says_why_and_logs(project: Project, tmp_path: Path) -> None:
    class Log:
        def __init__(self) -> None:
            self.warnings: list[tuple[str, dict[str, Any]]] = []

        def warning(self, event: str, **kw: Any) -> None:
            self.warnings.append((event, kw))

    def leak(ws: ap.Workspace) -> ap.Edits:
        (ws.get().root / "feedback_tabs.md").write_text(topic("Tabs", "indent with tabs", f"Use tabs. {SECRET_URL}"))
        return ap.Edits(f"done {SECRET_URL}", model_called=True)

    before = tree(project.memory_dir)
    log = Log()
    res = run(project, tmp_path, leak, log=log)
    assert res.verdict is ap.Verdict.REJECTED
    assert res.reasons == ("feedback_tabs.md: a secret was written (password in URL)",)
    assert "Sup3rS3cret" not in res.note and tree(project.memory_dir) == before
    assert log.warnings == [("dream.rejected", {"project": "-p", "run": "dream-1", "reasons": list(res.reasons)})]
    assert not staging_left(tmp_path)


def test_unchanged_never_staged_and_abandoned(project: Project, tmp_path: Path) -> None:
    res = run(project, tmp_path, lambda ws: ap.Edits("no session needed the model"))
    assert res.verdict is ap.Verdict.UNCHANGED and not res.staged and not res.model_called
    assert not (tmp_path / "state" / "staging").exists()  # nothing was copied

    def look(ws: ap.Workspace) -> ap.Edits:
        ws.get()
        return ap.Edits("all fine", model_called=True)

    res = run(project, tmp_path, look)
    assert res.verdict is ap.Verdict.UNCHANGED and res.staged and res.note == "all fine" and not res.changed_anything

    def stopped(ws: ap.Workspace) -> ap.Edits:
        write_new(ws)
        return ap.Edits("half way", model_called=True, abandoned=True)

    before = tree(project.memory_dir)
    assert run(project, tmp_path, stopped).verdict is ap.Verdict.ABANDONED
    assert tree(project.memory_dir) == before and not staging_left(tmp_path)


def test_a_failing_edit_propagates_and_leaves_no_staging(project: Project, tmp_path: Path) -> None:
    def boom(ws: ap.Workspace) -> ap.Edits:
        write_new(ws)
        raise RuntimeError("the model call failed")

    before = tree(project.memory_dir)
    with pytest.raises(RuntimeError):
        run(project, tmp_path, boom)
    assert tree(project.memory_dir) == before and not staging_left(tmp_path)
