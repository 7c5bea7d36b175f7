"""The service files (systemd user unit, launchd agent), rendered with the real paths of this installation.

``systemd/memd.service`` and ``launchd/com.memd.agent.plist`` in the repository are these same
renderings with placeholder paths (a test keeps them in step), so there is one source.
"""

from __future__ import annotations

import itertools
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


# The interpreter starts isolated: ``-I`` keeps the working folder, PYTHON* variables and the user's
# site-packages off ``sys.path`` (a ``~/structlog.py`` would otherwise shadow structlog and stop the
# service); the working folder is memd's state folder, never the home folder.
PY_FLAGS = ("-I",)
# Exit 2 is a usage or config error: restarting cannot fix it, so systemd must not loop on it.
EXIT_USAGE = 2
# Exit 3 from `memd run` is "already running" (memd.daemon.pidfile.AlreadyRunning): another daemon is the one.
EXIT_ALREADY_RUNNING = 3
# launchd restarts an agent that exits non-zero (KeepAlive SuccessfulExit false) and knows no "do not
# restart on this status": under launchd (``SERVICE_ENV`` set in the plist) `memd run` says "already
# running" and exits 0, so a daemon the user started is not raced every ThrottleInterval.
SERVICE_ENV = "MEMD_SERVICE"
# launchd's ThrottleInterval: at most one start per this many seconds (systemd's RestartSec alike)
THROTTLE_S = 10
# launchd rotates nothing: memd's own log rotates itself, and ``memd run`` under launchd writes
# its events only there (stdout/stderr then carry only what escapes the logger, capped below).


@dataclass(frozen=True)
class Install:
    argv: list[str]  # the command that runs the daemon
    home: Path
    log_dir: Path  # the state folder: the working folder, and launchd's stdout/stderr files
    stop_timeout_s: float
    env: dict[str, str] = field(default_factory=dict)
    # The folders the daemon writes (the Claude folder, the state folder). Given, the unit gets the
    # namespace sandbox (ProtectSystem=strict with these writable, PrivateTmp, ...); None: only the
    # options that need no namespace (see memd.daemon.sandbox for why and when).
    writable: tuple[Path, ...] | None = None
    # The folders the daemon reads to start at all (the interpreter's prefixes, memd's own code): a
    # sandbox option that would hide one of them is left out (``hidden_by_private_tmp``).
    reads: tuple[Path, ...] = ()


def global_flags(config_path: str | None = None, claude_dir: str | None = None) -> list[str]:
    """The global flags carried into the service, as absolute paths."""
    flags: list[str] = []
    for flag, value in (("--config", config_path), ("--claude-dir", claude_dir)):
        if value:
            flags += [flag, str(Path(value).expanduser().resolve())]
    return flags


def current(stop_timeout_s: float, state_dir: Path, config_path: str | None = None,
            claude_dir: str | None = None, *, writable: tuple[Path, ...] | None = None,
            flags: list[str] | None = None, python: str | None = None) -> Install:
    """This installation: this interpreter running this memd with the global flags given at install
    time (``--config``, ``--claude-dir``, as absolute paths), the variables that move its folders."""
    if flags is None:
        flags = global_flags(config_path, claude_dir)
    argv = [python or sys.executable, *PY_FLAGS, "-m", "memd", *flags, "run"]
    env = {k: os.environ[k] for k in PASSED_ENV if os.environ.get(k)}
    import memd

    reads = (Path(sys.prefix), Path(sys.base_prefix), Path(memd.__file__).parent)
    return Install(argv, Path.home(), state_dir, stop_timeout_s, env, writable, reads)


def placeholder(stop_timeout_s: float = 20.0) -> Install:
    """The template as kept in the repository (without the namespace sandbox: that one is written
    only where ``memd service install`` finds it works)."""
    return Install(["/path/to/python", *PY_FLAGS, "-m", "memd", "run"], Path("/Users/you"),
                   Path("/Users/you/.local/state/memd"), stop_timeout_s)


def installed_argv(kind: str, content: bytes) -> list[str] | None:
    """The command line an installed service file runs, or None when it cannot be read."""
    if kind == "launchd":
        try:
            argv = plistlib.loads(content).get("ProgramArguments")
        except Exception:  # not a plist
            return None
        return [str(a) for a in argv] if isinstance(argv, list) else None
    for line in content.decode("utf-8", "replace").splitlines():
        if line.startswith("ExecStart="):
            try:
                return [a.replace("%%", "%").replace("$$", "$") for a in shlex.split(line[len("ExecStart="):])]
            except ValueError:
                return None
    return None


def split_argv(argv: list[str]) -> tuple[str, list[str]] | None:
    """``(interpreter, global flags)`` of a memd service command line, or None when it is not one."""
    if len(argv) < 4 or argv[-1] != "run" or "memd" not in argv:
        return None
    i = argv.index("memd")
    if i < 2 or argv[i - 1] != "-m":
        return None
    return argv[0], argv[i + 1:-1]


def same_interpreter(a: str, b: str) -> bool:
    """Whether two interpreter paths start the same Python with the same packages: ``bin/python`` and
    ``bin/python3`` of one venv are one interpreter; two venvs over one base Python are not (their
    links resolve to the same file, so the folder must match too)."""
    if a == b:
        return True
    pa, pb = Path(a), Path(b)
    if pa.parent != pb.parent:
        return False
    try:
        return pa.resolve() == pb.resolve()
    except OSError:
        return False


def timeout_stop(stop_timeout_s: float) -> int:
    # The service manager must wait longer than memd's own graceful bound, or it kills a clean stop.
    return int(stop_timeout_s) + 15


def _specifiers(text: str) -> str:
    """``%`` starts a specifier (``%h`` the home folder) in every unit setting: a literal one is ``%%``."""
    return text.replace("%", "%%")


def _systemd_quote(arg: str, *, command: bool = False) -> str:
    """One word of a unit setting, quoted where needed; in a command line ``$`` is a variable too."""
    arg = _specifiers(arg)
    if command:
        arg = arg.replace("$", "$$")
    if arg and all(c.isalnum() or c in "/._-=:+@%$" for c in arg):
        return arg
    body = arg.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + body + '"'


# Options that need no namespace: seccomp filters and prctl()s an unprivileged user manager can
# set (NoNewPrivileges= makes them allowed), so they hold on every systemd machine. Not here:
# MemoryDenyWriteExecute= (libffi closures in ctypes/cffi may need W+X pages), CapabilityBoundingSet=
# (a user manager cannot drop capabilities it never had; an unprivileged memd has none), ProtectProc=
# and ProcSubset= (system services only), ProtectClock= (device access lists need a privileged manager).
BASE_HARDENING = (
    "NoNewPrivileges=yes",
    "UMask=0077",  # history and state hold copies of memory: private by default
    "RestrictSUIDSGID=yes",
    "LockPersonality=yes",
    "RestrictRealtime=yes",
    "RestrictNamespaces=yes",
    "KeyringMode=private",
    "SystemCallArchitectures=native",
    "SystemCallFilter=@system-service",
    "SystemCallErrorNumber=EPERM",
    # AF_NETLINK: glibc's getaddrinfo asks the kernel for the addresses in use (HTTPS to the API, git)
    "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK",
)
# Options that need a mount namespace, hence (for a user unit) a user namespace: written only where
# ``memd service install`` found one can be made (memd.daemon.sandbox). PrivateUsers= is said
# outright: systemd before 253 does not imply it, and without it these fail to start.
NAMESPACE_HARDENING = (
    "PrivateUsers=yes",
    "PrivateTmp=yes",
    "PrivateDevices=yes",
    "PrivateMounts=yes",
    "ProtectSystem=strict",  # all read-only but the folders below: memd writes only there
    "ProtectHome=read-only",  # the home folder is read (settings, ~/.gitconfig, ~/.ssh), never written
    "ProtectKernelTunables=yes",
    "ProtectKernelModules=yes",
    "ProtectKernelLogs=yes",
    "ProtectControlGroups=yes",
    "ProtectHostname=yes",
)


PRIVATE_TMP_HIDES = (Path("/tmp"), Path("/var/tmp"))  # what PrivateTmp=yes replaces with empty folders


def hidden_by_private_tmp(inst: Install) -> list[str]:
    """The paths the daemon needs (its interpreter, as given and resolved; memd's code; the interpreter's
    prefixes; the folders it works in; the config and state folders moved by variables) that lie under
    /tmp or /var/tmp: ``PrivateTmp=yes`` would hide them (systemd then fails with 203/EXEC, or memd finds
    no Claude folder), so the unit is written without it."""
    # the interpreter last: the unit's comment names the first, the same for bin/python and bin/python3
    paths = [*inst.reads, inst.log_dir, *(inst.writable or ())]
    paths += [Path(v) for k, v in inst.env.items() if k in PASSED_ENV and k != "CLAUDE_CODE_DISABLE_AUTO_MEMORY"]
    flags = inst.argv[inst.argv.index("memd") + 1:-1] if "memd" in inst.argv else []
    paths += [Path(v) for k, v in itertools.pairwise(flags) if k in ("--config", "--claude-dir")]
    paths.append(Path(inst.argv[0]))
    out: list[str] = []
    for p in paths:
        for q in (p, _resolved(p)):
            if any(q == t or t in q.parents for t in PRIVATE_TMP_HIDES) and str(q) not in out:
                out.append(str(q))
    return out


def _resolved(p: Path) -> Path:
    try:
        return p.resolve()
    except (OSError, RuntimeError):
        return p


def systemd_unit(inst: Install) -> str:
    env_lines = "".join(f"Environment={_systemd_quote(f'{k}={v}')}\n" for k, v in sorted(inst.env.items()))
    hardening = list(BASE_HARDENING)
    if inst.writable is not None:
        hidden = hidden_by_private_tmp(inst)
        hardening += [o for o in NAMESPACE_HARDENING if not (hidden and o == "PrivateTmp=yes")]
        if hidden:
            shown = _specifiers(hidden[0]).replace("\n", "\\n")
            hardening.append(f"# no PrivateTmp=: it would hide {shown} (under /tmp), "
                             "and the unit could not start")
        hardening += [f"ReadWritePaths={_systemd_quote('-' + str(p))}" for p in inst.writable]
    hardening_lines = "".join(line + "\n" for line in hardening)
    # the key file lives where memd's config lives: $XDG_CONFIG_HOME/memd/env when that is moved
    xdg = inst.env.get("XDG_CONFIG_HOME")
    # WorkingDirectory= and EnvironmentFile= take the rest of the line as it is: no quotes, only specifiers
    env_file = _specifiers(f"{xdg}/memd/env") if xdg else "%h/.config/memd/env"
    return f"""\
# {MARKER}
[Unit]
Description=memd: keeps Claude Code's auto memory healthy
After=default.target

[Service]
Type=notify
NotifyAccess=main
ExecStart={" ".join(_systemd_quote(a, command=True) for a in inst.argv)}
WorkingDirectory=-{_specifiers(str(inst.log_dir))}
ExecReload=/bin/kill -HUP $MAINPID
Restart=on-failure
# exit 2 is a bad config or usage: a restart cannot fix it (fix it, then `systemctl --user restart memd`);
# exit 3 is "already running": another daemon is the one
RestartPreventExitStatus={EXIT_USAGE} {EXIT_ALREADY_RUNNING}
RestartSec=10
WatchdogSec={WATCHDOG_S}
TimeoutStopSec={timeout_stop(inst.stop_timeout_s)}
# The API key, if any: ANTHROPIC_API_KEY=... in this file (chmod 600); a missing file is fine.
EnvironmentFile=-{env_file}
{env_lines}# Hardening: `memd service install` writes the namespace options only where they work here.
{hardening_lines}
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
        "ThrottleInterval": THROTTLE_S,
        "WorkingDirectory": str(inst.log_dir),
        "EnvironmentVariables": dict(sorted({**inst.env, SERVICE_ENV: "launchd"}.items())),
    }
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
