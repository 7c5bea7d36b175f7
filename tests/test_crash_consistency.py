"""Issue 12, crash consistency (quick tier; the long tier is bench/crash_consistency.py): a dream killed
at named fault points inside the apply window and at a random moment, on a copy of a real memory folder,
leaves each file before or after, the index linking no missing file, the history readable and undoable,
and the next run completes as an uninterrupted one, with no temp file left."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import campaign as C
from bench.crash_consistency import run


@pytest.mark.slow
def test_kills_inside_the_apply_window_lose_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folders = C.real_memory_folders()
    if not folders:
        pytest.skip("../shared/claude-data is not here")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    smallest = min(folders, key=lambda f: sum(1 for _ in f.iterdir()))
    res = run(5, seed=7, folders=[smallest], work=tmp_path, scripts=1, named_share=0.8,
              points=("apply.after_rename:2", "store.before_rename:3", "apply.before_index", "store.write:1"))
    assert res["violations"] == [], res
    assert res["stats"]["killed"] >= 4 and res["files_checked"] > 50
