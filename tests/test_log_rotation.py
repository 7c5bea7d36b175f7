"""memd.log and launchd's out/err files stay within `logging.max_bytes` x (`logging.backups` + 1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memd import config, logs
from memd.hooks import log as hook_log


@pytest.fixture(autouse=True)
def _reset_logging() -> object:
    yield
    logs.reset()


def test_the_logs_defaults_are_the_configs() -> None:
    assert config.LoggingConfig().max_bytes == logs.DEFAULT_MAX_BYTES
    assert config.LoggingConfig().backups == logs.DEFAULT_BACKUPS


def test_rotate_shifts_and_drops_the_oldest(tmp_path: Path) -> None:
    log = tmp_path / "memd.log"
    for n in range(5):
        log.write_text(f"generation {n}\n" * 10)
        assert logs.rotate(log, 50, 3)
    assert not log.exists()
    assert [(tmp_path / f"memd.log.{i}").read_text().split()[1] for i in (1, 2, 3)] == ["4", "3", "2"]
    assert not (tmp_path / "memd.log.4").exists()
    log.write_text("small\n")
    assert not logs.rotate(log, 50, 3) and log.exists()
    assert not logs.rotate(log, 0, 3)  # 0: never (logrotate's job)


def test_the_daemons_log_is_rotated_by_size_and_count(tmp_path: Path) -> None:
    """memd.log grew without bound (about 700 B per project per idle catch-up)."""
    logs.setup(tmp_path, level="info", console=False, max_bytes=4000, backups=2)
    log = logs.get_logger("memd.test")
    for i in range(400):
        log.info("job.finish", project=f"-home-u-p{i}", outcome="skipped")
        if i == 200:  # a hook's line between ours goes to whatever memd.log is now
            hook_log.append(str(tmp_path), "info", "hook.test")
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["memd.log", "memd.log.1", "memd.log.2"]
    for p in tmp_path.iterdir():
        assert p.stat().st_size < 4000 + 500
        for line in p.read_text().splitlines():
            json.loads(line)  # whole lines only
    assert "p399" in (tmp_path / "memd.log").read_text()


SCRIPT = """
import sys
from pathlib import Path
from memd import logs
state = Path(sys.argv[1])
logs.setup(state, level="info", console=True, max_bytes=3000, backups=2)
log = logs.get_logger("memd.test")
for i in range(300):
    log.info("job.finish", project=f"-home-u-p{i}", outcome="skipped")
print("the last line of stdout", flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("append", [True, False], ids=["O_APPEND", "no-O_APPEND"])
def test_launchds_out_file_is_kept_in_bounds(tmp_path: Path, append: bool) -> None:
    """launchd writes memd's stdout to launchd.out.log and never rotates it."""
    out = tmp_path / "launchd.out.log"
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else 0)
    fd = os.open(out, flags, 0o600)
    try:
        p = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], stdout=fd, stderr=subprocess.PIPE,
                           env={**os.environ, "NO_COLOR": "1"}, timeout=60)
    finally:
        os.close(fd)
    assert p.returncode == 0, p.stderr
    data = out.read_bytes()
    assert len(data) < 3000 + 500 and b"\0" not in data  # no hole where the truncated part was
    assert data.endswith(b"the last line of stdout\n")
    assert (tmp_path / "launchd.out.log.1").exists() and (tmp_path / "launchd.out.log.2").exists()
    assert not (tmp_path / "launchd.out.log.3").exists()


def test_a_crash_is_an_error_with_a_plain_scrubbed_traceback(tmp_path: Path) -> None:
    """Issue 25: a crash was logged at level "exception" (the documented error filter missed it), with a
    traceback outside the scrubber (and, on a console, rich's frames with their local variables)."""
    import json

    import structlog

    from memd import logs

    key = "AKIA" + "Q3EXAMPLEZ7Y4BQW"
    logs.setup(tmp_path, level="info", console=False)
    try:
        def job(memory_text: str, why: str) -> None:
            raise RuntimeError(f"boom: {why}")

        private = "the user's " + "private memory text"  # a local variable of the frames, never in the source
        for why in ("a plain failure", f"near {key}"):
            try:
                job(private, why)
            except RuntimeError as e:
                structlog.get_logger("memd.daemon").exception("job.crashed", error=str(e))
    finally:
        logs.reset()
    plain, secret = [json.loads(x) for x in (tmp_path / "memd.log").read_text().splitlines() if "job.crashed" in x]
    assert plain["level"] == secret["level"] == "error"
    assert "Traceback" in plain["exception"] and "in job" in plain["exception"]
    assert "the user's private memory text" not in json.dumps(plain)  # no local variables
    assert key not in json.dumps(secret)  # the traceback is scrubbed like every field
