"""Golden files: input and expected output side by side, one case per folder (tests/golden/).

- topic/<case>/input.md -> expected.json (what parsing a topic file yields; rendering gives back the input)
- view/<case>/MEMORY.md -> expected.txt (the loaded view, then the budget figures and hidden entries)
- lint/<case>/memory/ -> expected.txt (one finding per line)
- rebuild/<case>/memory/ -> expected.md (the rebuilt MEMORY.md) and expected.txt (fits, reasons, actions)

A new bug becomes a new case folder. ``MEMD_UPDATE_GOLDEN=1 pytest tests/test_golden.py`` rewrites
the expected files from the current code (review the diff before committing it).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memd.config import BudgetConfig
from memd.core import frontmatter, index
from memd.core.files import FolderSnapshot
from memd.core.lint import lint
from memd.core.rebuild import NORMALISE, REPAIR, plan_rebuild, topics_of
from memd.memfolder.folder import read_folder
from memd.record import replace

GOLDEN = Path(__file__).parent / "golden"
PINNED_MTIME = 1772712000.0  # 2026-03-05 12:00 UTC
UPDATE = os.environ.get("MEMD_UPDATE_GOLDEN") == "1"


def cases(kind: str) -> list[Path]:
    return sorted(p for p in (GOLDEN / kind).iterdir() if p.is_dir())


def compare(path: Path, actual: str) -> None:
    if UPDATE:
        path.write_bytes(actual.encode("utf-8"))
        return
    assert path.exists(), f"{path} is missing: run with MEMD_UPDATE_GOLDEN=1 to create it"
    assert actual == path.read_bytes().decode("utf-8"), f"{path} differs (MEMD_UPDATE_GOLDEN=1 to update)"


@pytest.mark.parametrize("case", cases("topic"), ids=lambda p: p.name)
def test_topic_file(case: Path) -> None:
    text = (case / "input.md").read_bytes().decode("utf-8")
    tf = frontmatter.parse(text)
    assert frontmatter.render(tf) == text
    got = {"shape": tf.shape, "name": tf.name, "description": tf.description, "type": tf.type,
           "meta": tf.meta, "frontmatter_lines": tf.frontmatter_lines, "newline": tf.newline,
           "error": tf.error, "yaml_error": tf.yaml_error, "body": tf.body}
    compare(case / "expected.json", json.dumps(got, indent=2, ensure_ascii=False, default=str) + "\n")


@pytest.mark.parametrize("case", cases("view"), ids=lambda p: p.name)
def test_loaded_view(case: Path) -> None:
    text = (case / "MEMORY.md").read_bytes().decode("utf-8")
    view = index.loaded_view(text)
    b = index.measure(text)
    tail = [
        "",
        "=" * 20,
        f"lines={view.lines} chars={view.chars} cut_by={view.cut_by} level={b.level}",
        *(f"hidden: line {e.line}: {e.title}" for e in b.hidden),
    ]
    compare(case / "expected.txt", view.text + "\n" + "\n".join(tail) + "\n")


@pytest.fixture
def utc() -> Iterator[None]:
    """The suggested MEM040 date is the file's local date: make it one date wherever the tests run."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if old is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = old
    time.tzset()


@pytest.mark.usefixtures("utc")
@pytest.mark.parametrize("case", cases("lint"), ids=lambda p: p.name)
def test_lint(case: Path) -> None:
    snap = read_folder(case / "memory", BudgetConfig())
    # MEM040 suggests the file's own date: pin every file's mtime (noon UTC)
    files = tuple(replace(f, mtime=PINNED_MTIME) if f.mtime is not None else f for f in snap.files)
    snap = FolderSnapshot(snap.memory_dir, snap.exists, snap.problem, files, snap.truncated)
    compare(case / "expected.txt", "".join(f.render() + "\n" for f in lint(snap)))


@pytest.mark.parametrize("mode", [NORMALISE, REPAIR])
@pytest.mark.parametrize("case", cases("rebuild"), ids=lambda p: p.name)
def test_rebuild(case: Path, mode: str) -> None:
    """expected.md / expected.txt: ``memd rebuild`` (normalise); expected.repair.md / .txt: what every
    unattended writer does (repair: within the budget, only what is broken changes)."""
    snap = read_folder(case / "memory", BudgetConfig())
    old = snap.index.text if snap.index is not None else None
    plan = plan_rebuild(old, topics_of(snap), BudgetConfig(), mode=mode)
    stem = "expected" if mode == NORMALISE else "expected.repair"
    compare(case / f"{stem}.md", plan.text)
    report = [f"fits: {plan.fits}", f"changed: {plan.changed}",
              *(f"reason: {r}" for r in plan.reasons), *(f"action: {a}" for a in plan.actions)]
    compare(case / f"{stem}.txt", "\n".join(report) + "\n")
    again = plan_rebuild(plan.text, topics_of(snap), BudgetConfig(), mode=mode)
    assert again.text == plan.text and not again.actions, "rebuilding a rebuilt index must change nothing"
