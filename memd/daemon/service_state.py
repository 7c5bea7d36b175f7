"""What the service manager says of memd's unit: running, failed (and how), its last log lines.

``memd service status`` compared only the installed file with the one it would write, so a unit that
could not start (systemd's 203/EXEC when its sandbox hid the interpreter) read "up to date". Here the
manager itself is asked: ``systemctl --user show`` (its state, result and exit status) and
``journalctl --user -u`` (its last lines), or ``launchctl print`` on macOS. Parsing is pure
(``parse_show``, ``describe``); asking is a bounded subprocess, and a manager that cannot be asked (no
user bus, no ``systemctl``) is said in words, never guessed.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field

TIMEOUT_S = 10.0
LOG_LINES = 8
# systemd's own exit statuses of a unit's process that never reached the program (systemd.exec(5))
SYSTEMD_EXIT = {200: "CHDIR", 203: "EXEC", 209: "STDOUT", 217: "USER", 218: "CAPABILITIES", 219: "CGROUP",
                226: "NAMESPACE", 227: "NO_NEW_PRIVILEGES", 228: "SECCOMP", 237: "KEYRING"}
_WHY = {
    203: "systemd could not run the interpreter (its path missing, or hidden by the unit's sandbox)",
    200: "systemd could not enter the working folder",
    226: "the unit's namespace sandbox could not be set up here (try `memd service install --sandbox off`)",
    2: "a bad config or usage error (systemd does not restart it: fix it, then `systemctl --user restart memd`)",
    3: "another memd is already running",
}
SHOW_PROPS = ("LoadState", "ActiveState", "SubState", "Result", "ExecMainCode", "ExecMainStatus", "NRestarts")


@dataclass
class UnitState:
    asked: bool  # the manager answered
    active: str = ""  # active, inactive, failed, activating, ...
    sub: str = ""
    result: str = ""  # success, exit-code, signal, timeout, watchdog, ...
    code: str = ""  # exited, killed, dumped (ExecMainCode) or ""
    status: int | None = None  # the main process's exit status or signal
    restarts: int = 0
    loaded: str = ""
    why_not: str = ""  # the manager could not be asked: why
    log: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.asked and (self.active == "failed" or self.result not in ("", "success"))


def parse_show(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, eq, value = line.partition("=")
        if eq:
            out[key.strip()] = value.strip()
    return out


_CODES = {"1": "exited", "2": "killed", "3": "dumped", "exited": "exited", "killed": "killed", "dumped": "dumped"}


def from_show(props: dict[str, str]) -> UnitState:
    status = props.get("ExecMainStatus", "")
    restarts = props.get("NRestarts", "0")
    return UnitState(True, props.get("ActiveState", ""), props.get("SubState", ""), props.get("Result", ""),
                     _CODES.get(props.get("ExecMainCode", ""), ""), int(status) if status.isdigit() else None,
                     int(restarts) if restarts.isdigit() else 0, props.get("LoadState", ""))


def describe(st: UnitState) -> str:
    """The unit's state in words: ``active (running)``, ``failed: exited with status 203/EXEC (...)``."""
    if not st.asked:
        return f"the service manager cannot be asked ({st.why_not})"
    if st.loaded == "not-found":
        return "not loaded (run `systemctl --user daemon-reload`)"
    head = f"{st.active} ({st.sub})" if st.sub else st.active
    if not st.failed:
        return head
    how = ""
    if st.status is not None and st.code == "exited":
        name = SYSTEMD_EXIT.get(st.status)
        how = f"exited with status {st.status}" + (f"/{name}" if name else "")
        if st.status in _WHY:
            how += f": {_WHY[st.status]}"
    elif st.status is not None and st.code in ("killed", "dumped"):
        import signal

        try:
            sig = signal.Signals(st.status).name
        except ValueError:
            sig = str(st.status)
        how = f"{st.code} by {sig}"
    result = f"result {st.result}" if st.result and st.result != "success" else ""
    bits = ", ".join(b for b in (how, result, f"restarted {st.restarts} time(s)" if st.restarts else "") if b)
    label = "failed" if st.active == "failed" else f"failed, now {head}"
    return label + (f": {bits}" if bits else "")


def _run(argv: list[str]) -> subprocess.CompletedProcess[str] | str:
    if shutil.which(argv[0]) is None:
        return f"no {argv[0]} on PATH"
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{argv[0]}: {e}"


def systemd_state(unit: str) -> UnitState:
    """Ask the user manager about ``unit``, and its journal for the last lines."""
    r = _run(["systemctl", "--user", "show", unit, *(f"--property={p}" for p in SHOW_PROPS)])
    if isinstance(r, str):
        return UnitState(False, why_not=r)
    if r.returncode != 0:
        first = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[0]
        return UnitState(False, why_not=f"systemctl --user: {first}")
    st = from_show(parse_show(r.stdout))
    j = _run(["journalctl", "--user", "-u", unit, "-n", str(LOG_LINES), "--no-pager", "-o", "short-iso", "-q"])
    if not isinstance(j, str) and j.returncode == 0:
        st.log = [ln for ln in j.stdout.splitlines() if ln.strip() and not ln.startswith("-- ")][-LOG_LINES:]
    return st


def launchd_state(label: str, uid: int) -> UnitState:
    r = _run(["launchctl", "print", f"gui/{uid}/{label}"])
    if isinstance(r, str):
        return UnitState(False, why_not=r)
    if r.returncode != 0:
        return UnitState(True, "inactive", "not loaded")
    props: dict[str, str] = {}
    for line in r.stdout.splitlines():
        key, eq, value = line.strip().partition(" = ")
        if eq and key in ("state", "last exit code", "runs"):
            props[key] = value.strip()
    last = props.get("last exit code", "")
    status = int(last) if last.lstrip("-").isdigit() else None
    failed = status not in (None, 0)
    return UnitState(True, props.get("state", ""), "", "exit-code" if failed else "success",
                     "exited" if status is not None else "", status)
