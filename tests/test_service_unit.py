"""The service files as a service manager reads them: an isolated start, no restart loop on a bad
config, escaped paths, hardening that holds where the machine allows it, `systemd-analyze` where it
is installed, a launchd dry run that is a plist, and a `service status` that tells the truth."""

from __future__ import annotations

import os
import plistlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memd import cli
from memd.daemon import sandbox
from memd.daemon import service_files as sf
from memd.daemon.child import ChildJob


def memd(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _unit_path() -> Path:
    return Path(os.environ["XDG_CONFIG_HOME"]) / "systemd" / "user" / "memd.service"


def _exec_start(unit: str) -> list[str]:
    argv = sf.installed_argv("systemd", unit.encode())
    assert argv is not None
    return argv


# ----------------------------------------------------------------------------- isolated start


@pytest.mark.slow
def test_a_module_in_the_home_folder_cannot_shadow_memds_imports(tmp_path: Path) -> None:
    """The unit ran `python3 -m memd run` in $HOME: a ~/structlog.py (or ~/memd.py) stopped the service."""
    home = tmp_path / "home"
    home.mkdir()
    for name in ("memd.py", "structlog.py", "yaml.py"):
        (home / name).write_text("import sys\nprint('shadowed')\nsys.exit(99)\n")
    argv = _exec_start(sf.systemd_unit(sf.current(20.0, tmp_path / "state")))
    # even started in the home folder (the old working folder), and with PYTHONPATH pointing there
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(home)}
    p = subprocess.run([*argv[:-1], "config", "show"], cwd=home, env=env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "shadowed" not in p.stdout + p.stderr


def test_the_job_child_starts_isolated_too() -> None:
    child = ChildJob("dream", None, Path("/c"), Path("/s"), log=None, timeout_s=1)  # type: ignore[arg-type]
    assert child.command[1] == "-I"


def test_the_unit_works_in_the_state_folder_and_stops_restarting_on_a_config_error() -> None:
    unit = sf.systemd_unit(sf.current(20.0, Path("/st/memd")))
    lines = unit.splitlines()
    assert "WorkingDirectory=-/st/memd" in lines
    assert "RestartPreventExitStatus=2 3" in lines and "Restart=on-failure" in lines  # usage; already running
    plist = plistlib.loads(sf.launchd_plist(sf.current(20.0, Path("/st/memd"))))
    assert plist["WorkingDirectory"] == "/st/memd" and plist["ProgramArguments"][1] == "-I"


def test_percent_and_dollar_in_paths_are_escaped() -> None:
    """A config at ~/50%Quota/c.toml made the unit fail verification (`%Q` is no specifier)."""
    inst = sf.current(20.0, Path("/s/5%$x"), "/x/50%Quota/c$HOME.toml", writable=(Path("/c/50%"),))
    unit = sf.systemd_unit(inst)
    assert "--config /x/50%%Quota/c$$HOME.toml run" in unit
    assert "WorkingDirectory=-/s/5%%$x" in unit  # `$` is a variable only in command lines
    assert "ReadWritePaths=-/c/50%%" in unit
    # and it reads back as it was
    assert sf.installed_argv("systemd", unit.encode()) == inst.argv


# ----------------------------------------------------------------------------- hardening


def test_hardening_without_namespaces_is_always_there_and_the_namespace_tier_only_when_asked() -> None:
    basic = sf.systemd_unit(sf.current(20.0, Path("/s"))).splitlines()
    for line in sf.BASE_HARDENING:
        assert line in basic
    assert not any(line.startswith(("ProtectSystem=", "PrivateTmp=", "PrivateUsers=")) for line in basic)
    inst = sf.current(20.0, Path("/s"), writable=(Path("/h/.claude"), Path("/s")))
    full = sf.systemd_unit(inst).splitlines()
    hidden = sf.hidden_by_private_tmp(inst)  # this interpreter or this clone may lie under /tmp
    for line in (*sf.BASE_HARDENING, *sf.NAMESPACE_HARDENING, "ReadWritePaths=-/h/.claude", "ReadWritePaths=-/s"):
        assert (line in full) is not (hidden and line == "PrivateTmp=yes"), line
    # git over HTTPS or SSH and the API need these address families; nothing here blocks the network
    assert "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK" in full
    assert not any(line.startswith(("PrivateNetwork=", "IPAddressDeny=")) for line in full)


def test_the_probe_answers_on_this_machine() -> None:
    reason = sandbox.namespaces_refused()
    assert reason is None or (isinstance(reason, str) and reason)


def test_the_probe_names_a_known_restriction(monkeypatch: pytest.MonkeyPatch) -> None:
    values = {"kernel.apparmor_restrict_unprivileged_userns": "1"}
    monkeypatch.setattr(sandbox, "_sysctl", values.get)
    reason = sandbox.namespaces_refused()
    assert reason is not None and "AppArmor" in reason and "Ubuntu 24.04" in reason
    monkeypatch.setattr(sandbox, "_sysctl", {"user.max_user_namespaces": "0"}.get)
    assert "max_user_namespaces" in (sandbox.namespaces_refused() or "")


def test_install_falls_back_cleanly_where_namespaces_are_refused(claude_home: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sandbox, "namespaces_refused", lambda: "AppArmor restricts unprivileged user namespaces")
    code, out, err = memd(capsys, "service", "install", "--manager", "systemd")
    assert code == 0, err
    unit = _unit_path().read_text()
    assert "NoNewPrivileges=yes" in unit and "ProtectSystem=" not in unit and "PrivateUsers=" not in unit
    assert "sandbox: only the options that need no namespace (AppArmor restricts" in out
    # status judges the file by the tier it was written with: not "differs" because the probe says so
    code, out, _ = memd(capsys, "service", "status", "--manager", "systemd")
    assert code == 0 and "up to date" in out


def test_install_sandboxes_where_namespaces_work(claude_home: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sandbox, "namespaces_refused", lambda: None)
    code, out, err = memd(capsys, "service", "install", "--manager", "systemd")
    assert code == 0, err
    unit = _unit_path().read_text().splitlines()
    # the test's folders (and the clone, and its venv) may lie under /tmp, which PrivateTmp would hide
    under_tmp = any(q == t or t in q.parents for q in (claude_home.resolve(), Path(sys.prefix).resolve(),
                                                         Path(sf.__file__).resolve()) for t in sf.PRIVATE_TMP_HIDES)
    assert "ProtectSystem=strict" in unit and ("PrivateTmp=yes" in unit) is not under_tmp
    assert ("warning: PrivateTmp left out" in out) is under_tmp, out
    assert f"ReadWritePaths=-{claude_home.resolve()}" in unit
    assert f"ReadWritePaths=-{(Path(os.environ['XDG_STATE_HOME']) / 'memd').resolve()}" in unit
    assert "sandbox: namespaces" in out
    code, out, _ = memd(capsys, "service", "status", "--manager", "systemd")
    assert code == 0 and "up to date" in out and "sandbox: namespaces" in out
    # --sandbox off, or no Claude folder yet (strict would keep a folder made later read-only)
    code, out, err = memd(capsys, "service", "install", "--manager", "systemd", "--sandbox", "off")
    assert code == 0 and "ProtectSystem=" not in _unit_path().read_text() and "--sandbox off" in out
    shutil.rmtree(claude_home)
    code, out, err = memd(capsys, "service", "install", "--manager", "systemd")
    assert code == 0 and "ProtectSystem=" not in _unit_path().read_text() and "no Claude folder yet" in out


# ----------------------------------------------------------------------------- systemd-analyze


def _analyze() -> str:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed here (apt-get install systemd); verified where it is")
    return tool


def _analyze_env(tmp_path: Path) -> dict[str, str]:
    run = tmp_path / "run"
    run.mkdir(mode=0o700, exist_ok=True)
    # --user needs a runtime folder to look up, not a running user manager
    return {**os.environ, "XDG_RUNTIME_DIR": str(run)}


@pytest.mark.parametrize("sandboxed", [False, True], ids=["basic", "namespaces"])
def test_systemd_analyze_verifies_the_unit(tmp_path: Path, sandboxed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    tool = _analyze()
    odd = tmp_path / "50%Quota $HOME"
    odd.mkdir()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(odd / "config"))  # into Environment= and EnvironmentFile=
    monkeypatch.setenv("XDG_STATE_HOME", str(odd))
    cfg = odd / "c.toml"
    cfg.write_text("")
    inst = sf.current(20.0, odd / "state", str(cfg), str(odd),
                      writable=(odd, odd / "state") if sandboxed else None)
    path = tmp_path / "memd.service"
    path.write_text(sf.systemd_unit(inst))
    p = subprocess.run([tool, "--user", "verify", str(path)], capture_output=True, text=True,
                       env=_analyze_env(tmp_path), timeout=60)
    assert p.returncode == 0 and "memd.service" not in p.stdout + p.stderr, p.stdout + p.stderr


# systemd-analyze security's exposure (0 safe .. 10 unsafe), as measured with systemd 252 (docs/daemon.md)
EXPOSURE = {False: 6.6, True: 4.0}


@pytest.mark.parametrize("sandboxed", [False, True], ids=["basic", "namespaces"])
def test_systemd_analyze_security_score(tmp_path: Path, sandboxed: bool) -> None:
    tool = _analyze()
    # paths outside /tmp (the test's own folders may lie there, and PrivateTmp would then be left out)
    state, claude = Path("/home/u/.local/state/memd"), Path("/home/u/.claude")
    inst = sf.Install(["/opt/memd/bin/python", "-I", "-m", "memd", "run"], Path("/home/u"), state, 20.0, {},
                      (claude, state) if sandboxed else None, (Path("/opt/memd"),))
    path = tmp_path / "memd.service"
    path.write_text(sf.systemd_unit(inst))
    p = subprocess.run([tool, "--user", "security", "--offline=true", str(path)], capture_output=True,
                       text=True, env=_analyze_env(tmp_path), timeout=60)
    if p.returncode != 0 and "offline" in p.stderr:
        pytest.skip(f"this systemd-analyze has no --offline (systemd < 250): {p.stderr.strip()}")
    m = re.search(r"Overall exposure level for memd\.service: (\d+\.\d)", p.stdout)
    assert m, p.stdout + p.stderr
    assert float(m.group(1)) <= EXPOSURE[sandboxed], p.stdout


# ----------------------------------------------------------------------------- launchd


def test_launchd_dry_run_prints_a_valid_plist(claude_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = memd(capsys, "service", "install", "--manager", "launchd", "--dry-run")
    assert code == 0
    data = plistlib.loads(out.encode())  # stdout is the file; the notes went to stderr
    assert data["Label"] == sf.LABEL and "would write" in err
    memd(capsys, "service", "install", "--manager", "launchd")
    path = Path(os.environ["HOME"]) / "Library" / "LaunchAgents" / f"{sf.LABEL}.plist"
    assert path.read_bytes() == out.encode()


# ----------------------------------------------------------------------------- status


def test_status_takes_python_and_python3_of_one_venv_as_one(claude_home: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    bindir = Path(sys.executable).parent
    other_name = next((bindir / n for n in ("python3", "python") if (bindir / n).name != Path(sys.executable).name
                       and (bindir / n).exists()), None)
    if other_name is None or other_name.resolve() != Path(sys.executable).resolve():
        pytest.skip("this interpreter's folder has no second name for it")
    memd(capsys, "service", "install", "--manager", "systemd")
    text = _unit_path().read_text().replace(f"ExecStart={sys.executable} ", f"ExecStart={other_name} ")
    _unit_path().write_text(text)
    code, out, _ = memd(capsys, "service", "status", "--manager", "systemd")
    assert code == 0 and "up to date" in out, out
    # another venv over the same base Python is another installation
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(Path(sys.executable).resolve())
    _unit_path().write_text(text.replace(f"ExecStart={other_name} ", f"ExecStart={venv / 'python'} "))
    code, out, _ = memd(capsys, "service", "status", "--manager", "systemd")
    assert code == 1 and "differs" in out


def test_status_keeps_the_install_flags_and_its_advice_repeats_them(claude_home: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("")
    code, _, err = memd(capsys, "--config", str(cfg), "service", "install", "--manager", "systemd")
    assert code == 0, err
    code, out, _ = memd(capsys, "service", "status", "--manager", "systemd")  # flags not repeated
    assert code == 0 and "up to date" in out, out
    _unit_path().write_text(_unit_path().read_text().replace("RestartSec=10", "RestartSec=11"))
    code, out, _ = memd(capsys, "service", "status", "--manager", "systemd")
    assert code == 1 and f"run `memd --config {cfg.resolve()} service install --manager systemd` again" in out
    # flags given now that differ from the installed ones: differs
    _unit_path().write_text(_unit_path().read_text().replace("RestartSec=11", "RestartSec=10"))
    (tmp_path / "other.toml").write_text("")
    code, out, _ = memd(capsys, "--config", str(tmp_path / "other.toml"), "service", "status", "--manager", "systemd")
    assert code == 1 and "differs" in out


def test_private_tmp_is_left_out_when_a_path_the_daemon_needs_lies_under_tmp(tmp_path: Path) -> None:
    """Issue 34 #6: PrivateTmp=yes hid a memd installed under /tmp (systemd: 203/EXEC). Each path the daemon
    needs (the interpreter, memd's code, the Claude and state folders, the config) under /tmp or /var/tmp
    leaves it out; none does, and it is written."""
    def inst(python: str = "/opt/venv/bin/python", claude: str = "/home/u/.claude", state: str = "/home/u/.state",
             reads: tuple[str, ...] = ("/opt/venv", "/usr"), flags: tuple[str, ...] = ()) -> sf.Install:
        return sf.Install([python, "-I", "-m", "memd", *flags, "run"], Path("/home/u"), Path(state), 20.0, {},
                          (Path(claude), Path(state)), tuple(Path(r) for r in reads))

    assert sf.hidden_by_private_tmp(inst()) == []
    assert "\nPrivateTmp=yes\n" in sf.systemd_unit(inst())
    for case in (inst(python="/tmp/clone/.venv-ci/bin/python"), inst(claude="/tmp/x/.claude"),
                 inst(state="/var/tmp/state"), inst(reads=("/opt/venv", "/tmp/clone/memd")),
                 inst(flags=("--config", "/tmp/c.toml"))):
        unit = sf.systemd_unit(case)
        assert "PrivateTmp=" not in unit.replace("# no PrivateTmp=", ""), unit
        assert "ProtectSystem=strict" in unit and "# no PrivateTmp=: it would hide /" in unit
    # a link under /home to an interpreter under /tmp is hidden all the same
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(sys.executable)
    link = Path("/tmp") / f"memd-test-{os.getpid()}-python"
    try:
        link.symlink_to(sys.executable)
        assert str(link) in sf.hidden_by_private_tmp(inst(python=str(link)))
    finally:
        link.unlink()


def test_the_units_state_in_words() -> None:
    """Issue 34 #6: what `memd service status` says of the unit, from `systemctl --user show`'s answer."""
    from memd.daemon import service_state as ss

    def said(text: str) -> str:
        return ss.describe(ss.from_show(ss.parse_show(text)))

    assert said("LoadState=loaded\nActiveState=active\nSubState=running\nResult=success\nExecMainCode=0\n"
                "ExecMainStatus=0\nNRestarts=0\n") == "active (running)"
    exec_fail = said("LoadState=loaded\nActiveState=failed\nSubState=failed\nResult=exit-code\nExecMainCode=1\n"
                     "ExecMainStatus=203\nNRestarts=0\n")
    assert exec_fail.startswith("failed: exited with status 203/EXEC: systemd could not run the interpreter"), exec_fail
    assert "result exit-code" in exec_fail
    looping = said("LoadState=loaded\nActiveState=activating\nSubState=auto-restart\nResult=exit-code\n"
                   "ExecMainCode=1\nExecMainStatus=3\nNRestarts=4\n")
    assert looping == ("failed, now activating (auto-restart): exited with status 3: another memd is already "
                       "running, result exit-code, restarted 4 time(s)"), looping
    killed = said("ActiveState=failed\nSubState=failed\nResult=watchdog\nExecMainCode=2\nExecMainStatus=6\n")
    assert killed == "failed: killed by SIGABRT, result watchdog", killed
    assert said("LoadState=not-found\nActiveState=inactive\n").startswith("not loaded")
    assert ss.describe(ss.UnitState(False, why_not="no systemctl on PATH")) == \
        "the service manager cannot be asked (no systemctl on PATH)"
