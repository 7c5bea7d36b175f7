"""The daemon's commands in-process: service files, logs, report, foreground dream/catch-up, trigger."""

from __future__ import annotations

import json
import os
import plistlib
import sys
from pathlib import Path

import pytest

from memd import cli
from memd.config import Config
from memd.daemon import service_files as sf
from memd.state import StateStore

ROOT = Path(__file__).resolve().parent.parent


def memd(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_repository_templates_are_the_rendered_files() -> None:
    assert (ROOT / "systemd" / "memd.service").read_text() == sf.systemd_unit(sf.placeholder())
    assert (ROOT / "launchd" / "com.memd.agent.plist").read_bytes() == sf.launchd_plist(sf.placeholder())


def test_systemd_unit_contents() -> None:
    unit = sf.systemd_unit(sf.current(20.0, Path("/s"), None))
    for line in ("Type=notify", "ExecReload=/bin/kill -HUP $MAINPID", "Restart=on-failure",
                 "EnvironmentFile=-%h/.config/memd/env", "NoNewPrivileges=yes", "WantedBy=default.target",
                 f"WatchdogSec={sf.WATCHDOG_S}"):
        assert line in unit.splitlines()
    stop = int(next(x for x in unit.splitlines() if x.startswith("TimeoutStopSec=")).split("=")[1])
    assert stop > 20.0  # longer than memd's own graceful bound
    assert f"ExecStart={sys.executable} -I -m memd run" in unit


def test_service_install_status_uninstall_systemd(claude_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = memd(capsys, "service", "install", "--dry-run", "--manager", "systemd")
    assert code == 0 and "Type=notify" in out and "systemctl --user" in err
    unit = Path(os.environ["XDG_CONFIG_HOME"]) / "systemd" / "user" / "memd.service"
    assert not unit.exists()
    code, out, _ = memd(capsys, "service", "install", "--manager", "systemd")
    assert code == 0 and unit.exists()
    assert "systemctl --user daemon-reload && systemctl --user enable --now memd.service" in out
    assert "memd hooks install" in out
    assert f"ExecStart={sys.executable} -I -m memd run" in unit.read_text()
    assert f"Environment=XDG_STATE_HOME={os.environ['XDG_STATE_HOME']}" in unit.read_text()
    # the key file is read from where memd's config lives
    assert f"EnvironmentFile=-{os.environ['XDG_CONFIG_HOME']}/memd/env" in unit.read_text()
    code, out, _ = memd(capsys, "service", "status", "--manager", "systemd")
    assert "installed, up to date" in out and "not running" in out
    wants = unit.parent / "default.target.wants" / "memd.service"
    wants.parent.mkdir()
    wants.symlink_to(unit)  # what `systemctl enable` makes
    code, out, _ = memd(capsys, "service", "uninstall", "--manager", "systemd", "--dry-run")
    assert unit.exists() and "would remove" in out
    code, out, _ = memd(capsys, "service", "uninstall", "--manager", "systemd")
    assert code == 0 and not unit.exists() and not os.path.lexists(wants)
    assert "systemctl --user stop memd.service" in out


def test_service_refuses_to_clobber_a_foreign_file(claude_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    unit = Path(os.environ["XDG_CONFIG_HOME"]) / "systemd" / "user" / "memd.service"
    unit.parent.mkdir(parents=True)
    unit.write_text("[Service]\nExecStart=/usr/bin/something-else\n")
    code, _, err = memd(capsys, "service", "install", "--manager", "systemd")
    assert code == 1 and "not memd's" in err
    assert "something-else" in unit.read_text()


def test_service_install_launchd(claude_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = memd(capsys, "service", "install", "--manager", "launchd")
    path = Path(os.environ["HOME"]) / "Library" / "LaunchAgents" / "com.memd.agent.plist"
    assert code == 0 and "launchctl bootstrap gui/$(id -u)" in out
    data = plistlib.loads(path.read_bytes())
    assert data["RunAtLoad"] is True and data["KeepAlive"] == {"SuccessfulExit": False}
    assert data["ProcessType"] == "Background"
    assert data["ProgramArguments"] == [sys.executable, "-I", "-m", "memd", "run"]
    assert Path(data["StandardErrorPath"]).parent.is_dir()  # launchd needs the folder to exist
    # a throttle, and the variable that makes "already running" an exit launchd does not restart
    assert data["ThrottleInterval"] == sf.THROTTLE_S >= 10
    assert data["EnvironmentVariables"][sf.SERVICE_ENV] == "launchd"


def test_already_running_is_no_crash_for_launchd_to_restart(claude_home: Path) -> None:
    """Hole: the launchd agent restarts every non-zero exit (KeepAlive SuccessfulExit false), and `memd
    run` beside a running daemon exits 3: launchd restarted it for ever. Under the plist's environment it
    now says "already running" and exits 0; elsewhere it stays exit 3 (the systemd unit does not restart
    on 3: RestartPreventExitStatus)."""
    import subprocess

    from memd.daemon.pidfile import PidLock

    state = Path(os.environ["XDG_STATE_HOME"]) / "memd"
    lock = PidLock(state)
    lock.acquire()  # the running daemon (this process holds its pid file)
    try:
        plist = plistlib.loads(sf.launchd_plist(sf.current(20.0, state)))
        for extra, want in (({}, 3), (plist["EnvironmentVariables"], 0)):
            env = {**os.environ, **extra}
            p = subprocess.run([sys.executable, "-m", "memd", "run"], cwd=ROOT, env=env, capture_output=True,
                               text=True, timeout=60, check=False)
            assert p.returncode == want, (extra, p.stderr)
            assert "memd is already running" in p.stderr
    finally:
        lock.release()
    assert "RestartPreventExitStatus=2 3" in sf.systemd_unit(sf.current(20.0, state)).splitlines()


def test_logs_command(claude_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = memd(capsys, "logs")
    assert code == 1 and "no log yet" in err
    sd = Path(os.environ["XDG_STATE_HOME"]) / "memd"
    sd.mkdir(parents=True)
    lines = [json.dumps({"event": f"e{i}", "severity": "info", "timestamp": "2026-11-29T01:02:03Z", "n": i})
             for i in range(100)]
    (sd / "memd.log").write_text("\n".join(lines) + "\n")
    code, out, _ = memd(capsys, "logs", "-n", "3")
    assert code == 0 and out.splitlines() == ["2026-11-29 01:02:03 INFO    e97 n=97",
                                              "2026-11-29 01:02:03 INFO    e98 n=98",
                                              "2026-11-29 01:02:03 INFO    e99 n=99"]
    code, out, _ = memd(capsys, "logs", "-n", "1", "--json")
    assert json.loads(out)["event"] == "e99"


def test_report_command(claude_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # nothing to report: it says so and exits 0 (issue 13; it was exit 1, or an empty report)
    code, out, _ = memd(capsys, "report")
    assert code == 0 and out.startswith("nothing to report yet: no check-in report in")
    code, out, _ = memd(capsys, "report", "--now")
    assert code == 0 and out.startswith("nothing to report since ") and "no runs" in out
    from memd.jobs import checkin

    sd = Path(os.environ["XDG_STATE_HOME"]) / "memd"
    checkin.write_report(sd, checkin.Report("# memd check-in, test\n"), 1_800_000_000)
    code, out, _ = memd(capsys, "report")
    assert out == "# memd check-in, test\n"


def test_foreground_dream_and_catchup(claude_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mem = claude_home / "projects" / "-home-u-app" / "memory"
    mem.mkdir(parents=True)
    (mem / "MEMORY.md").write_text("- [A](a.md) — a\n")
    code, out, _ = memd(capsys, "dream", "-home-u-app")
    assert code == 0 and "-home-u-app: not run (min_sessions: 0 sessions touched" in out
    assert out.count("Model work is off") == 1
    code, out, _ = memd(capsys, "dream", "-home-u-app", "--force", "--dry-run")
    # the rebuild would drop the index's only entry (its file is missing): refused, with the reason, exit 1
    assert code == 1 and out.splitlines()[1].startswith("-home-u-app: refused (+0 ~0 -0): index rebuild refused: ")
    assert out.count("odel work is off") == 1 and "would drop 1 of 1 index entries" in out
    code, out, _ = memd(capsys, "catchup", "--dry-run")
    assert code == 0 and "-home-u-app: " in out
    sd = Path(os.environ["XDG_STATE_HOME"]) / "memd"
    with StateStore.open(sd) as st:
        assert st.runs() == []  # dry runs change nothing and are not runs of record
    code, out, _ = memd(capsys, "catchup")
    assert code == 0
    with StateStore.open(sd) as st:
        assert [r.job for r in st.runs()] == ["catchup"]
    events = [json.loads(x)["event"] for x in (sd / "memd.log").read_text().splitlines()]
    assert "job.skip" in events and "job.finish" in events


def test_trigger_without_a_daemon(claude_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = memd(capsys, "trigger", "dream")
    assert code == 1 and "not running" in err
    code, _, err = memd(capsys, "trigger", "reload", "--project", ".")
    assert code == 2


def test_status_shows_the_daemon_part(claude_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (claude_home / "projects" / "-home-u-app" / "memory").mkdir(parents=True)
    code, out, _ = memd(capsys, "status")
    assert code == 0 and "daemon: not running" in out and "open warnings: none" in out
    assert Config  # the schema stays importable beside the commands


def test_logs_follow_survives_rotation(claude_home: Path) -> None:
    import subprocess
    import time

    sd = Path(os.environ["XDG_STATE_HOME"]) / "memd"
    sd.mkdir(parents=True)
    log = sd / "memd.log"
    log.write_text(json.dumps({"event": "before", "severity": "info"}) + "\n")
    proc = subprocess.Popen([sys.executable, "-m", "memd", "logs", "-f", "-n", "1"], stdout=subprocess.PIPE,
                            text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    import select

    def readline() -> str:  # never hang the suite: fail after a generous wait instead
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "memd logs -f printed nothing"
        return proc.stdout.readline()

    try:
        assert "before" in readline()
        with log.open("a") as f:
            f.write(json.dumps({"event": "appended", "severity": "info"}) + "\n")
        assert "appended" in readline()
        os.replace(log, sd / "memd.log.1")  # rotated: the follower moves to the new file
        time.sleep(0.1)
        log.write_text(json.dumps({"event": "after.rotation", "severity": "info"}) + "\n")
        assert "after.rotation" in readline()
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _unit() -> Path:
    return Path(os.environ["XDG_CONFIG_HOME"]) / "systemd" / "user" / "memd.service"


def test_service_files_carry_the_marker_line() -> None:
    unit = sf.systemd_unit(sf.current(20.0, Path("/s"), "/etc/memd.toml"))
    plist = sf.launchd_plist(sf.current(20.0, Path("/s"), "/etc/memd.toml"))
    assert f"# {sf.MARKER}" in unit.splitlines()
    assert f"<!-- {sf.MARKER} -->".encode() in plist.splitlines()
    assert sf.is_memds(unit.encode()) and sf.is_memds(plist)
    assert not sf.is_memds(b"[Service]\nExecStart=/usr/bin/memd run\n")  # a command line is no marker
    assert not sf.is_memds(b"<?xml version='1.0'?><plist><dict><key>Label</key><string>x</string></dict></plist>")


def test_service_with_a_config_uninstalls_and_reinstalls(claude_home: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """`memd --config F service install` wrote a unit `service uninstall` then called "not memd's"
    (the check looked for the text `memd run`, and --config sits between the two)."""
    cfg = tmp_path / "memd.toml"
    cfg.write_text("[budget]\nwarn_ratio = 0.7\n")
    code, out, err = memd(capsys, "--config", str(cfg), "service", "install", "--manager", "systemd")
    assert code == 0, err
    assert f"-m memd --config {cfg.resolve()} run" in _unit().read_text()
    code, out, err = memd(capsys, "--config", str(cfg), "service", "status", "--manager", "systemd")
    assert code == 0 and "installed, up to date" in out
    # a plain install (no --config) rewrites memd's own unit instead of refusing it
    code, out, err = memd(capsys, "service", "install", "--manager", "systemd")
    assert code == 0 and "--config" not in _unit().read_text(), err
    code, out, err = memd(capsys, "--config", str(cfg), "service", "install", "--manager", "systemd")
    assert code == 0, err
    code, out, err = memd(capsys, "service", "uninstall", "--manager", "systemd")
    assert code == 0 and not _unit().exists(), err


def test_a_unit_written_before_the_marker_is_still_memds(claude_home: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    _unit().parent.mkdir(parents=True)
    _unit().write_text("# memd user service (written by `memd service install`; `memd service uninstall` "
                       "removes it)\n[Service]\nExecStart=/old/python -m memd --config /x.toml run\n")
    code, _, err = memd(capsys, "service", "uninstall", "--manager", "systemd")
    assert code == 0 and not _unit().exists(), err


def test_service_install_carries_every_global_flag(claude_home: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """`memd --claude-dir X service install` dropped the flag: the service watched ~/.claude."""
    other = tmp_path / "other-claude"
    (other / "projects").mkdir(parents=True)
    cfg = tmp_path / "c.toml"
    cfg.write_text("")
    code, _, err = memd(capsys, "--claude-dir", str(other), "--config", str(cfg), "service", "install",
                        "--manager", "launchd")
    assert code == 0, err
    path = Path(os.environ["HOME"]) / "Library" / "LaunchAgents" / "com.memd.agent.plist"
    argv = plistlib.loads(path.read_bytes())["ProgramArguments"]
    assert argv == [sys.executable, "-I", "-m", "memd", "--config", str(cfg.resolve()), "--claude-dir",
                    str(other.resolve()), "run"]
    code, _, err = memd(capsys, "service", "install", "--manager", "systemd", "--claude-dir", str(other))
    assert code == 0 and f"--claude-dir {other.resolve()} run" in _unit().read_text(), err
    # and the daemon that line starts parses it (global flags before the command)
    args = cli.build_parser("run").parse_args(argv[4:])
    assert args.command == "run" and args.claude_dir == str(other.resolve())


def test_service_status_exits_like_hooks_status(claude_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = memd(capsys, "service", "status", "--manager", "systemd")
    assert code == 1 and "not installed" in out
    memd(capsys, "service", "install", "--manager", "systemd")
    code, out, _ = memd(capsys, "service", "status", "--manager", "systemd")
    assert code == 0 and "up to date" in out
    _unit().write_text(_unit().read_text().replace("RestartSec=10", "RestartSec=11"))
    code, out, _ = memd(capsys, "service", "status", "--manager", "systemd")
    assert code == 1 and "differs" in out
    _unit().unlink()
    _unit().mkdir()  # unreadable as a file
    code, out, _ = memd(capsys, "service", "status", "--manager", "systemd")
    assert code == 2 and "cannot read" in out


def test_report_lists_manual_rebuilds_and_undos(claude_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mem = claude_home / "projects" / "-home-u-app" / "memory"
    mem.mkdir(parents=True)
    (mem / "a.md").write_text("---\nname: a\ndescription: the a\ntype: user\n---\nA.\n")
    (mem / "MEMORY.md").write_text("- [Gone](gone.md) — deleted\n")
    code, out, err = memd(capsys, "rebuild", "-home-u-app")
    assert code == 0 and "written" in out, err
    code, out, err = memd(capsys, "undo", "-home-u-app")
    assert code == 0 and "undid" in out, err
    code, out, _ = memd(capsys, "report", "--now")
    assert code == 0
    rows = [line for line in out.splitlines() if line.startswith("| ") and "-home-u-app" in line]
    assert [row.split(" | ")[1:4] for row in rows] == [["rebuild", "-home-u-app", "changed"],
                                                      ["undo", "-home-u-app", "changed"]]
    assert "rebuild MEMORY.md" in rows[0] and "undo rebuild-" in rows[1]
    code, out, _ = memd(capsys, "rebuild", "-home-u-app", "--dry-run")  # a dry run is no run
    code, out, _ = memd(capsys, "report", "--now")
    assert sum(1 for line in out.splitlines() if "-home-u-app" in line) == 2
