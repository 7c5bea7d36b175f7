"""Issue 12, concurrent writers (quick tier; the long tier is bench/concurrent_writers.py): a process
writing, editing, renaming and deleting topic files and appending to MEMORY.md as Claude Code does, while
memd dreams, catches up, rebuilds and undoes: no write is lost, memd leaves no link to a missing file and
no temp file."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.concurrent_writers import run


@pytest.mark.slow
def test_no_write_of_claude_code_is_lost_while_memd_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    res = run(160, seed=3, work=tmp_path, pause_s=0.04)
    assert res["lost"] == [], res
    assert res["dangling_links_left_by_memd"] == [] and res["temp_files"] == [], res
    assert res["writes"] >= 100 and sum(res["memd_jobs"].values()) >= 4, res
