"""Issue 12, faults of the running daemon (quick tier; the long tier is `bench/faults.py --daemon`): a real
`memd run` (isolated HOME and XDG folders, the loopback stub as the Messages API) dreams on SIGUSR1 while
a fault is armed in its model job (no space left for the memory writes, the job's child killed
mid-apply). For each: the daemon stays up, the run is recorded with its
true outcome and reason (the log and the run log agree), no memory file is lost or half-written, and the
next dream, the fault gone, does the work. One daemon outlives them all and stops cleanly (exit 0)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.faults import run_daemon


@pytest.mark.slow
def test_the_daemon_outlives_its_faults_and_says_why(tmp_path: Path) -> None:
    res = run_daemon(work=tmp_path, quick=True)
    bad = [r for r in res["rows"] if not r["ok"]]
    assert bad == [], bad
    assert res["faults"] >= 2 and res["files_lost"] == 0
    assert res["daemon_alive_at_end"] and res["daemon_exit"] == 0
    said = {r["fault"]: r["reason"] for r in res["rows"]}
    assert any("no space left on device" in v for v in said.values())
    assert any("the job's process died (killed by SIGKILL)" in v for v in said.values())
