"""Issue 12, faults (quick tier; the long tier is bench/faults.py): memory writes failing for no space
and an immutable file, the state file corrupt or replaced by a folder, the API overloaded or answering
garbage, under a real `memd dream` process: the true reason is said, the exit code is non-zero where the
command failed, no memory file is lost or half-changed, and the same command works once the fault is gone."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.faults import run


@pytest.mark.slow
def test_faults_are_named_lose_nothing_and_go_away(tmp_path: Path) -> None:
    res = run(work=tmp_path, quick=True)
    bad = [r for r in res["rows"] if not r["ok"]]
    assert bad == [], bad
    assert res["faults"] >= 6 and res["files_lost"] == 0
