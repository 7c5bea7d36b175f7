"""Issue 20, the history writer under kills (quick tier; the long tier is bench/crash_history.py): rebuilds,
undos and dreams SIGKILLed at random moments and at named points inside the history's writes (dulwich's own
lock-file writes included, and the first history setup), on a copy of a real memory folder. After each kill
every file is before or after, the index links no missing file, `memd history` lists every applied change,
`memd undo` restores exactly, the next run succeeds, and no dulwich lock is left to wedge the project."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import campaign as C
from bench.crash_history import run


@pytest.mark.slow
def test_kills_inside_the_history_writer_lose_nothing_and_wedge_nothing(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    folders = C.real_memory_folders()
    if not folders:
        pytest.skip("../shared/claude-data is not here")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    smallest = min(folders, key=lambda f: sum(1 for _ in f.iterdir()))
    res = run(36, seed=11, folders=[smallest], work=tmp_path, scripts=1, named_share=0.75)
    assert res["violations"] == [], res
    assert res["killed"] >= 30 and res["stats"]["files checked"] > 300, res
    assert res["stats"]["dulwich locks left by the kill"] >= 3, res  # the kills did land inside dulwich
    assert res["stats"]["logged history.lock_recovered"] >= res["stats"]["dulwich locks left by the kill"], res
    assert {"rebuild killed", "undo killed", "dream killed", "rebuilds with no history yet"} <= set(res["stats"]), res
