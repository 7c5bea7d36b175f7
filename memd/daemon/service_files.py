"""The service files (systemd user unit, launchd agent), rendered with the real paths of this installation.

``systemd/memd.service`` and ``launchd/com.memd.agent.plist`` in the repository are these same
renderings with placeholder paths (a test keeps them in step), so there is one source.
"""

from __future__ import annotations

import os
import plistlib
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

UNIT_NAME = "memd.service"
LABEL = "com.memd.agent"
WATCHDOG_S = 120  # systemd restarts a daemon whose main loop has not pinged for this long
# Variables that change where memd looks; captured at install time so the service sees what you see.
PASSED_ENV = ("CLAUDE_CONFIG_DIR", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "CLAUDE_CODE_DISABLE_AUTO_MEMORY")
# The line that marks a file as memd's: ownership checks match on it, never on the command line
# (which changes with every global flag carried into it).
MARKER = "memd-managed: written by `memd service install`; `memd service uninstall` removes it"
_LEGACY_HEADER = b"# memd user service (written by `memd service install`"  # units written before the marker


@dataclass(frozen=True)
class Install:
    argv: list[str]  # the command that runs the daemon
    home: Path
    log_dir: Path  # launchd's stdout/stderr files (memd's own log is memd.log in the state folder)
    stop_timeout_s: float
    env: dict[str, str] = field(default_factory=dict)


def current(stop_timeout_s: float, state_dir: Path, config_path: str | None = None,
            claude_dir: str | None = None) -> Install:
    """This installation: this interpreter running this memd with the global flags given at install
    time (``--config``, ``--claude-dir``, as absolute paths), the variables that move its folders."""
    flags: list[str] = []
    for flag, value in (("--config", config_path), ("--claude-dir", claude_dir)):
        if value:
            flags += [flag, str(Path(value).expanduser().resolve())]
    argv = [sys.executable, "-m", "memd", *flags, "run"]
    env = {k: os.environ[k] for k in PASSED_ENV if os.environ.get(k)}
    return Install(argv, Path.home(), state_dir, stop_timeout_s, env)


def placeholder(stop_timeout_s: float = 20.0) -> Install:
    """The template as kept in the repository."""
    return Install(["/path/to/python", "-m", "memd", "run"], Path("/Users/you"),
                   Path("/Users/you/.local/state/memd"), stop_timeout_s)


def timeout_stop(stop_timeout_s: float) -> int:
    # The service manager must wait longer than memd's own graceful bound, or it kills a clean stop.
    return int(stop_timeout_s) + 15


def _systemd_quote(arg: str) -> str:
    if arg and all(c.isalnum() or c in "/._-=:+@" for c in arg):
        return arg
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def systemd_unit(inst: Install) -> str:
    env_lines = "".join(f"Environment={_systemd_quote(f'{k}={v}')}\n" for k, v in sorted(inst.env.items()))
    # the key file lives where memd's config lives: $XDG_CONFIG_HOME/memd/env when that is moved
    xdg = inst.env.get("XDG_CONFIG_HOME")
    env_file = _systemd_quote(f"{xdg}/memd/env") if xdg else "%h/.config/memd/env"
    return f"""\
# {MARKER}
[Unit]
Description=memd: keeps Claude Code's auto memory healthy
After=default.target

[Service]
Type=notify
NotifyAccess=main
ExecStart={" ".join(_systemd_quote(a) for a in inst.argv)}
ExecReload=/bin/kill -HUP $MAINPID
Restart=on-failure
RestartSec=10
WatchdogSec={WATCHDOG_S}
TimeoutStopSec={timeout_stop(inst.stop_timeout_s)}
# The API key, if any: ANTHROPIC_API_KEY=... in this file (chmod 600); a missing file is fine.
EnvironmentFile=-{env_file}
{env_lines}NoNewPrivileges=yes

[Install]
WantedBy=default.target
"""


def launchd_plist(inst: Install) -> bytes:
    data: dict[str, object] = {
        "Label": LABEL,
        "ProgramArguments": list(inst.argv),
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ProcessType": "Background",
        "StandardOutPath": str(inst.log_dir / "launchd.out.log"),
        "StandardErrorPath": str(inst.log_dir / "launchd.err.log"),
        "ExitTimeOut": timeout_stop(inst.stop_timeout_s),
        "WorkingDirectory": str(inst.home),
    }
    if inst.env:
        data["EnvironmentVariables"] = dict(sorted(inst.env.items()))
    xml = plistlib.dumps(data, sort_keys=False)
    head, sep, rest = xml.partition(b"<plist ")  # the marker as a comment before the root element
    return head + f"<!-- {MARKER} -->\n".encode() + sep + rest


def is_memds(content: bytes) -> bool:
    """Whether a service file is memd's: it carries the marker line (or, written before the marker,
    memd's unit header or a plist labelled ``com.memd.agent``)."""
    for line in content.splitlines():
        text = line.strip()
        if text in (f"# {MARKER}".encode(), f"<!-- {MARKER} -->".encode()) or text.startswith(_LEGACY_HEADER):
            return True
    if content.lstrip().startswith(b"<?xml"):
        try:
            return bool(plistlib.loads(content).get("Label") == LABEL)
        except Exception:  # not a plist: not ours
            return False
    return False


@dataclass(frozen=True)
class Target:
    kind: str  # systemd | launchd
    path: Path
    content: bytes
    start: str  # the one command that starts it
    stop: str  # the command that stops and unloads it (works after its file is removed)
    extra: tuple[Path, ...] = ()  # links the service manager makes (removed on uninstall)


def target(kind: str, inst: Install) -> Target:
    if kind == "systemd":
        base = Path(os.environ.get("XDG_CONFIG_HOME") or inst.home / ".config") / "systemd" / "user"
        return Target("systemd", base / UNIT_NAME, systemd_unit(inst).encode(),
                      f"systemctl --user daemon-reload && systemctl --user enable --now {UNIT_NAME}",
                      f"systemctl --user stop {UNIT_NAME} && systemctl --user daemon-reload",
                      (base / "default.target.wants" / UNIT_NAME,))
    path = inst.home / "Library" / "LaunchAgents" / f"{LABEL}.plist"
    return Target("launchd", path, launchd_plist(inst),
                  f"launchctl bootstrap gui/$(id -u) {shlex.quote(str(path))}",
                  f"launchctl bootout gui/$(id -u)/{LABEL}")


def default_kind() -> str:
    return "launchd" if sys.platform == "darwin" else "systemd"
