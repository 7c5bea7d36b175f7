"""Faults: every write path refused (no space, permission, an immutable file, the file-size limit), the
state file locked, corrupt or replaced by a folder, the history removed, the projects root removed, and
the model API failing every way. Each fault is injected under a real ``memd dream`` command (a process
of its own, the real SDK against the loopback stub), then removed, and the same command run again.

For every fault the campaign records: the exit code (non-zero where the command could not do its work:
1 failed/partial, 3 not run), whether the output names the true reason, whether any memory file was lost
or changed half-way (every file is as before, or as the recovered run leaves it), and whether the next
run, without the fault, does the work (exit 0, ``changed``).

The daemon's part (``run_daemon``, ``--daemon``): one real ``memd run`` (isolated HOME and XDG folders,
the loopback stub) outlives every fault: each is armed while it runs (a fault point for its next model
job through ``MEMD_FAULT_FILE``, a hung model, a process holding the state file's write lock, the history
or the state folder unwritable or full), a dream is triggered (SIGUSR1), and the campaign checks the
outcome and reason in the log and the run log, the memory folder (nothing lost or half-written, no temp
file, no dangling link, Claude Code's lock not left held), that the daemon is still up; then the fault
is cleared and the next dream must change the folder.

Faults that need root (a small tmpfs, ``chattr +i``) are skipped elsewhere, and said so.
Run: ``.venv/bin/python bench/faults.py`` (both parts; ``--commands`` or ``--daemon`` for one; figures in
docs/reliability.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import campaign as C
from tests.plugins.stub_api import Reply, StubAPI

ROOT = Path(__file__).resolve().parent.parent
NAME = "-home-dev-faults"


def fresh_project(claude: Path, src: Path | None) -> dict[str, bytes]:
    """The project as a copy of a real memory folder (or a small one); its files."""
    mem = claude / "projects" / NAME / "memory"
    if src is not None:
        C.copy_project(src, claude, NAME)
    else:
        C.write_tree(mem, {"MEMORY.md": b"- [A](user_a.md) - a\n",
                           **{f"user_{c}.md": f"---\nname: {c}\ndescription: {c}\ntype: user\n---\n{c}.\n".encode()
                              for c in "abcdefghijkl"}})
    return C.tree(mem)


def smallest_real_folder() -> Path | None:
    """The smaller of the real memory folders (../shared/claude-data), None without them."""
    folders = C.real_memory_folders()
    return min(folders, key=lambda f: sum(1 for _ in f.iterdir())) if folders else None


def script_dream(stub: StubAPI, before: dict[str, bytes], seed: int) -> None:
    """The model's next consolidation of the folder (deterministic in seed; it deletes nothing)."""
    C.clear(stub)
    stub.script(*C.dream_script(stub, before, seed, delete=False))


@dataclass
class Env:
    root: Path
    stub: StubAPI
    claude: Path = field(init=False)
    state: Path = field(init=False)
    before: dict[str, bytes] = field(default_factory=dict)
    seed: int = 0

    def __post_init__(self) -> None:
        self.claude = self.root / "claude"
        self.state = self.root / "home" / ".local" / "state" / "memd"
        cfg = self.root / "memd.toml"
        cfg.write_text(f'[model]\nbase_url = "{self.stub.base_url}"\nmax_retries = 0\ntimeout_s = 3.0\n'
                       "[dream]\nmax_tool_turns = 4\n")

    @property
    def mem(self) -> Path:
        return self.claude / "projects" / NAME / "memory"

    def fresh(self, src: Path | None) -> None:
        """The project as a copy of a real memory folder (or a small one), and the model's next reply."""
        self.before = fresh_project(self.claude, src)

    def script(self) -> None:
        self.seed += 1
        script_dream(self.stub, self.before, self.seed)

    def memd(self, *args: str, limit_fsize: int | None = None, env: dict[str, str] | None = None,
             timeout: float = 180) -> tuple[int, str]:
        e = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_", "MEMD_"))}
        e.update(HOME=str(self.root / "home"), XDG_STATE_HOME=str(self.root / "home" / ".local" / "state"),
                 XDG_CONFIG_HOME=str(self.root / "home" / ".config"), ANTHROPIC_API_KEY="test",
                 PYTHONPATH=str(ROOT), NO_COLOR="1", **(env or {}))

        def limit() -> None:
            if limit_fsize is not None:
                resource.setrlimit(resource.RLIMIT_FSIZE, (limit_fsize, limit_fsize))

        p = subprocess.run([sys.executable, "-m", "memd", "--config", str(self.root / "memd.toml"),
                            "--claude-dir", str(self.claude), *args], env=e, capture_output=True, text=True,
                           timeout=timeout, preexec_fn=limit)
        return p.returncode, (p.stdout + p.stderr).strip()


@dataclass
class Row:
    fault: str
    exit: int = -1
    expected_exit: tuple[int, ...] = (1,)
    reason: str = ""  # the line of output that names the fault
    reason_ok: bool = False
    lost: list[str] = field(default_factory=list)  # files neither as before nor as the recovered run left them
    recovered: bool = False
    skipped: str = ""

    @property
    def ok(self) -> bool:
        return bool(self.skipped) or (self.exit in self.expected_exit and self.reason_ok and not self.lost
                                      and self.recovered)


def _root() -> bool:
    return os.geteuid() == 0


def _chattr(flag: str, path: Path) -> bool:
    return shutil.which("chattr") is not None and subprocess.run(
        ["chattr", flag, str(path)], capture_output=True).returncode == 0


@contextlib.contextmanager
def _tmpfs(where: Path, size: str = "512k") -> Iterator[bool]:
    where.mkdir(parents=True, exist_ok=True)
    ok = _root() and subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                                    capture_output=True).returncode == 0
    try:
        yield ok
    finally:
        if ok:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _fill(folder: Path) -> None:
    with contextlib.suppress(OSError), open(folder / ".filler", "wb") as f:
        while True:
            f.write(b"x" * 4096)
            f.flush()


def scenario(env: Env, src: Path | None, fault: str, inject: Callable[[], Any], clear: Callable[[], Any],
             expect: str | tuple[str, ...], *, expected_exit: tuple[int, ...] = (1,), fsize: int | None = None,
             extra_env: dict[str, str] | None = None, model: Callable[[], None] | None = None,
             args: tuple[str, ...] = ("dream", NAME, "--force")) -> Row:
    """Inject a fault, run the command, check it; clear the fault, run again, check the work is done."""
    row = Row(fault, expected_exit=expected_exit)
    if _ONLY and not any(o.lower() in fault.lower() for o in _ONLY):
        row.skipped = "not selected"
        return row
    env.fresh(src)
    (model or env.script)()
    try:
        skip = inject()
        if isinstance(skip, str) and skip:
            row.skipped = skip
            return row
        row.exit, out = env.memd(*args, limit_fsize=fsize, env=extra_env)
        wanted = (expect,) if isinstance(expect, str) else expect
        hits = [ln for ln in out.splitlines() if any(w.lower() in ln.lower() for w in wanted)]
        row.reason = (hits[0] if hits else out.splitlines()[-1] if out else "")[:240]
        row.reason_ok = bool(hits)
        # a folder the fault itself removed (the projects root) is the user's doing, not a loss of memd's
        during = C.tree(env.mem) if env.mem.is_dir() else dict(env.before)
    finally:
        clear()
    # the fault gone: the same command does the work
    env.script()
    code, out = env.memd(*args)
    after = C.tree(env.mem)
    row.recovered = code == 0 and after != env.before and not C.dangling(env.mem) and not C.temps(env.mem)
    if not row.recovered:
        row.reason += f" | recovery: exit {code}: {out.splitlines()[-1] if out else ''}"[:200]
    # the scripts delete nothing: a file of before that is gone, during the fault or after it, is lost
    row.lost = [f"{rel} (gone {'during the fault' if rel not in during else 'after it'})"
                for rel in sorted(env.before) if rel not in during or rel not in after]
    return row


_ONLY: list[str] = []


def run(work: Path | None = None, quick: bool = False, only: tuple[str, ...] = ()) -> dict[str, Any]:
    _ONLY[:] = only
    stub = StubAPI()
    rows: list[Row] = []
    t0 = time.monotonic()
    src = smallest_real_folder()
    with tempfile.TemporaryDirectory(prefix="memd-faults-", dir=work) as tmp:
        env = Env(Path(tmp), stub)
        nothing: Callable[[], None] = lambda: None  # noqa: E731

        def fault_env(spec: str) -> dict[str, str]:
            return {"MEMD_FAULT": spec}

        # -- every write path refused
        for spec, words in (("store.write=ENOSPC", "no space left on device"),
                            ("store.write=EACCES", "permission denied"),
                            ("store.write=EPERM", "operation not permitted"),
                            ("store.before_rename=EIO", "i/o error")):
            if quick and spec.endswith(("EACCES", "EIO")):
                continue
            # every store write fails, memd's state folder's too: the dream's lock note (issue 34: what a kill
            # gives back) cannot be written, so the dream is not run (3), saying why; a fault that spares it
            # fails the memory writes (1)
            rows.append(scenario(env, src, f"memory writes fail ({spec})", nothing, nothing, words,
                                 extra_env=fault_env(spec), expected_exit=(1, 3)))
        if not quick:
            rows.append(scenario(env, src, "the first file written fails (store.write:1=ENOSPC): partial",
                                 nothing, nothing, "no space left on device",
                                 extra_env=fault_env("store.write:1=ENOSPC")))

            def immutable_file() -> str:
                targets = [p for p in sorted(env.mem.glob("*.md")) if p.name != "MEMORY.md"]
                return "" if _root() and all(_chattr("+i", t) for t in targets) else "needs root and chattr"

            rows.append(scenario(env, src, "the topic files are immutable (chattr +i): new files land", immutable_file,
                                 lambda: [_chattr("-i", p) for p in env.mem.glob("*.md")],
                                 ("operation not permitted", "immutable")))

            def immutable_folder() -> str:
                return "" if _root() and _chattr("+i", env.mem) else "needs root and chattr"

            rows.append(scenario(env, src, "the memory folder is immutable (no lock, no write)", immutable_folder,
                                 lambda: _chattr("-i", env.mem), "cannot write the lock", expected_exit=(3,)))

            def immutable_state() -> str:
                env.state.mkdir(parents=True, exist_ok=True)
                for p in env.state.iterdir():
                    if p.name == "jobs.lock":
                        p.unlink()
                return "" if _root() and _chattr("+i", env.state) else "needs root and chattr"

            rows.append(scenario(env, src, "memd's state folder is immutable", immutable_state,
                                 lambda: _chattr("-i", env.state), "cannot write the job lock", expected_exit=(3,)))
            rows.append(scenario(env, src, "file-size limit 20 KB (RLIMIT_FSIZE) on a fresh state",
                                 lambda: shutil.rmtree(env.state, ignore_errors=True), nothing,
                                 ("file-size limit", "file too large"), fsize=20_000))
            mounts: list[contextlib.ExitStack] = []
            for what, sub in (("the memory folder", "mem"), ("memd's state folder", "state")):

                def on_full_tmpfs(sub: str = sub) -> str:
                    stack = contextlib.ExitStack()
                    mounts.append(stack)
                    if sub == "mem":
                        files = C.tree(env.mem)
                        shutil.rmtree(env.mem)
                        if not stack.enter_context(_tmpfs(env.mem)):
                            env.fresh(src)
                            return "needs root to mount a tmpfs"
                        env.mem.chmod(0o755)
                        for rel, data in files.items():  # into the mount point (write_tree would remove it)
                            (env.mem / rel).parent.mkdir(parents=True, exist_ok=True)
                            (env.mem / rel).write_bytes(data)
                        _fill(env.mem)
                    else:
                        env.memd("status")  # the state exists, then its disk fills up
                        saved = env.root / "state-saved"
                        shutil.copytree(env.state, saved)
                        shutil.rmtree(env.state)
                        if not stack.enter_context(_tmpfs(env.state, "2m")):
                            shutil.copytree(saved, env.state)
                            return "needs root to mount a tmpfs"
                        shutil.copytree(saved, env.state, dirs_exist_ok=True)
                        _fill(env.state)
                    return ""

                def unmount(sub: str = sub) -> None:
                    folder = env.mem if sub == "mem" else env.state
                    keep = C.tree(folder) if sub == "mem" else {}
                    for m in mounts:
                        m.close()
                    mounts.clear()
                    if sub == "mem":
                        keep.pop(".filler", None)
                        C.write_tree(folder, keep)

                rows.append(scenario(env, src, f"{what} is on a full disk (tmpfs)", on_full_tmpfs, unmount,
                                     ("no space left on device", "disk is full"), expected_exit=(1, 3)))

        # -- the state file
        holder: list[sqlite3.Connection] = []

        def lock_state() -> None:
            env.memd("status")
            c = sqlite3.connect(env.state / "state.sqlite3", timeout=1, isolation_level=None)
            c.execute("BEGIN EXCLUSIVE")
            holder.append(c)

        def unlock_state() -> None:
            for c in holder:
                c.rollback()
                c.close()
            holder.clear()

        if not quick:  # it waits out the busy timeout (10 s)
            rows.append(scenario(env, src, "the state file is locked by another process", lock_state,
                                 unlock_state, "the state database is busy", expected_exit=(3,)))

        def corrupt_state() -> None:
            env.memd("status")
            for p in env.state.glob("state.sqlite3*"):
                p.unlink()
            (env.state / "state.sqlite3").write_bytes(b"this is not a database" * 100)

        rows.append(scenario(env, src, "the state file is corrupt (set aside, rebuilt: the run goes on)",
                             corrupt_state, nothing, ("changed", "set aside"), expected_exit=(0,)))

        def state_folder() -> None:
            env.memd("status")
            for p in env.state.glob("state.sqlite3*"):
                p.unlink()
            (env.state / "state.sqlite3").mkdir()

        rows.append(scenario(env, src, "the state file is replaced by a folder", state_folder,
                             lambda: shutil.rmtree(env.state / "state.sqlite3"), "is a folder"))
        if not quick:
            rows.append(scenario(env, src, "the history folder is removed (a new one starts: the run goes on)",
                                 lambda: shutil.rmtree(env.state / "history", ignore_errors=True), nothing,
                                 "changed", expected_exit=(0,)))

            def no_root() -> None:
                shutil.rmtree(env.claude / "projects")

            def recreate() -> None:
                C.write_tree(env.mem, env.before)

            rows.append(scenario(env, src, "the projects root is removed (then recreated)", no_root, recreate,
                                 ("no project", "not found", "no such", "does not exist"), expected_exit=(1, 2)))

        # -- the model API failing every way
        def api(*replies: Reply | dict[str, Any]) -> Callable[[], None]:
            def go() -> None:
                C.clear(stub)
                stub.script(*replies)
            return go

        never_stops = stub.message(stub.memory("view", path="/memories"))
        for what, replies, words in (
            ("429 rate limited", (stub.error(429, "rate limited", retry_after=0),), ("429", "rate")),
            ("529 overloaded", (stub.error(529, "overloaded"),), ("529", "overloaded")),
            ("500 server error", (stub.error(500, "boom"),), ("500", "server")),
            ("a timeout (the reply takes longer than timeout_s)", (Reply(body=stub.message(stub.text("late")),
                                                                          delay=5.0),), ("timed out", "timeout")),
            ("a malformed body", (Reply(raw=b"{not json"),), ("malformed", "invalid", "decode", "json", "error")),
            ("absurd usage numbers", (stub.message(stub.text("done"), usage={"input_tokens": 2**70,
                                                                             "output_tokens": -5}),),
             ("nothing to change", "unchanged")),
            ("a model that never stops calling tools", (never_stops,) * 10, ("cap", "calls", "turns")),
        ):
            if quick and what not in ("529 overloaded", "a malformed body"):
                continue
            rows.append(scenario(env, src, f"API: {what}", nothing, nothing, words, model=api(*replies),
                                 expected_exit=(0,) if what == "absurd usage numbers" else (1,)))
    stub.close()
    rows = [r for r in rows if r.skipped != "not selected"]
    return {"faults": len(rows), "skipped": sum(1 for r in rows if r.skipped),
            "passed": sum(1 for r in rows if r.ok and not r.skipped), "files_lost": sum(len(r.lost) for r in rows),
            "seconds": round(time.monotonic() - t0, 1), "rows": [r.__dict__ | {"ok": r.ok} for r in rows]}


# ----------------------------------------------------------------------------- the daemon

JOB_TIMEOUT_S = 20.0  # daemon.job_timeout_s of the campaign's daemon: the hang is killed past it
HOLD_STATE = """
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN IMMEDIATE")
c.execute("INSERT OR REPLACE INTO kv (key, value) VALUES ('faults.holder', 'x')")
print("held", flush=True)
sys.stdin.read()
"""


@dataclass
class DaemonRow:
    fault: str
    outcome: str = ""  # the project's outcome in the log ("not run": the job could not start)
    expected: tuple[str, ...] = ("failed",)
    reason: str = ""
    reason_ok: bool = False
    recorded: str = ""  # where the outcome and reason were recorded: "run log" (the row agrees), "log"
    lost: list[str] = field(default_factory=list)  # files gone, half-written, temp files, dangling links
    recovered: bool = False
    alive: bool = False  # the daemon still running after the fault
    skipped: str = ""

    @property
    def ok(self) -> bool:
        return bool(self.skipped) or (self.outcome in self.expected and self.reason_ok and bool(self.recorded)
                                      and not self.lost and self.recovered and self.alive)


def _windows() -> dict[str, str]:
    """Dream and check-in windows 12 hours away, no catch-up cron: only the campaign's triggers run jobs."""
    h = (time.gmtime().tm_hour + 12) % 24
    return {"dream_window": f"{h:02d}:00-{h:02d}:29", "checkin_window": f"{h:02d}:30-{h:02d}:59",
            "catchup_cron": "0 0 1 1 *"}


class DaemonEnv:
    """A real ``memd run`` (isolated HOME and XDG folders, the loopback stub as the Messages API) and one
    project, a copy of a real memory folder; faults armed and cleared while it runs."""

    def __init__(self, root: Path, stub: StubAPI, src: Path | None) -> None:
        from tests.plugins.daemon import DaemonProc

        self.root, self.stub, self.src = root, stub, src
        home = root / "home"
        home.mkdir(parents=True)
        self.claude = root / "claude"
        (self.claude / "projects").mkdir(parents=True)
        self.fault_file = root / "fault.spec"
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("ANTHROPIC_", "CLAUDE_", "XDG_", "MEMD_", "NOTIFY_SOCKET", "WATCHDOG_"))}
        env.update(HOME=str(home), XDG_STATE_HOME=str(home / ".local" / "state"),
                   XDG_CONFIG_HOME=str(home / ".config"), CLAUDE_CONFIG_DIR=str(self.claude),
                   PYTHONPATH=str(ROOT), TZ="UTC", ANTHROPIC_API_KEY="test", MEMD_FAULT_FILE=str(self.fault_file))
        self.d = DaemonProc(root, env, home, self.claude, home / ".local" / "state" / "memd",
                            home / ".config" / "memd" / "config.toml")
        w = _windows()
        self.d.write_config(
            "[daemon]\ndebounce_quiet_s = 0.2\ndebounce_max_s = 1.0\nreconcile_interval_s = 5\n"
            f"stop_timeout_s = 10\njob_timeout_s = {JOB_TIMEOUT_S}\n"
            f'[model]\nbase_url = "{stub.base_url}"\nmax_retries = 0\ntimeout_s = 60.0\n'
            "[dream]\nmax_tool_turns = 4\n"
            f'[schedule]\ndream_window = "{w["dream_window"]}"\ncheckin_window = "{w["checkin_window"]}"\n'
            f'catchup_cron = "{w["catchup_cron"]}"\n')
        self.before: dict[str, bytes] = {}
        self.seed = 100
        self.jobs = 0
        self.mounted = False

    @property
    def mem(self) -> Path:
        return self.claude / "projects" / NAME / "memory"

    @property
    def state(self) -> Path:
        return self.d.state_dir

    def start(self) -> None:
        if _root():  # memd's state folder on a small tmpfs of its own (a full disk is one fault); its log
            self.state.mkdir(parents=True)  # beside it, so the log stays writable when the disk is full
            self.mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(self.state)],
                                          capture_output=True).returncode == 0
            if self.mounted:
                (self.state / "memd.log").symlink_to(self.root / "memd.log")
        self.d.start()
        self.d.wait_for("daemon.ready", timeout=120)

    def close(self) -> int:
        code = self.d.stop(timeout=60) if self.d.proc is not None and self.d.proc.poll() is None else -1
        self.d.kill()
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.state)], capture_output=True)
        return code

    def fresh(self) -> None:
        self.before = fresh_project(self.claude, self.src)

    def script(self) -> None:
        self.seed += 1
        script_dream(self.stub, self.before, self.seed)

    def dream(self) -> tuple[str, str, dict[str, Any]]:
        """SIGUSR1 (the daemon's "dream now"): (outcome, reason, the job.finish or job.not_run event)."""
        self.jobs += 1
        seen = len(self.d.events())
        self.d.signal(signal.SIGUSR1)
        deadline = time.monotonic() + JOB_TIMEOUT_S + 120
        while True:
            new = self.d.events()[seen:]
            end = next((e for e in new if e.get("job") == "dream" and e.get("event") in ("job.end", "job.not_run")),
                       None)
            if end is not None:
                break
            if any(e.get("event") == "job.already_queued" for e in new):
                return "trigger dropped", "job.already_queued while no dream was waiting", {}
            if self.d.proc is not None and self.d.proc.poll() is not None:
                return "daemon exited", self.d.stderr()[-300:], {}
            if time.monotonic() > deadline:
                return "no answer", "", {}
            time.sleep(0.1)
        if end["event"] == "job.not_run":
            return "not run", str(end.get("reason", "")), end
        ev = next((e for e in new if e.get("event") == "job.finish" and e.get("project") == NAME), {})
        return str(ev.get("outcome", "")), f"{ev.get('error') or ''} {ev.get('message') or ''}".strip(), ev

    def row_of_last_run(self) -> Any:
        from memd.state import StateStore

        with StateStore.open(self.state, timeout=30) as st:
            runs = st.runs(job="dream", project=NAME, limit=1)
        return runs[0] if runs else None

    def damage(self, during: dict[str, bytes]) -> list[str]:
        """Files of before gone, changed topic files that lost a line of before (half-written), temp
        files, index links to missing files."""
        out = [f"{rel}: gone" for rel in sorted(self.before) if rel not in during]
        for rel, data in during.items():
            old = self.before.get(rel)
            if old is None or old == data or rel == "MEMORY.md" or C.LOCK in rel:
                continue
            lines = [ln for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]
            if any(ln not in lines for ln in old.decode("utf-8", "replace").splitlines() if ln.strip()):
                out.append(f"{rel}: half-written (a line of before is missing)")
        out += [f"{t}: temp file" for t in C.temps(self.mem)]
        out += [f"dangling link: {m}" for m in C.dangling(self.mem)]
        return out


def daemon_case(env: DaemonEnv, fault: str, inject: Callable[[], str | None], clear: Callable[[], Any],
                expect: str | tuple[str, ...], *, outcomes: tuple[str, ...] = ("failed",),
                model: Callable[[], None] | None = None, in_run_log: bool = True) -> DaemonRow:
    """One fault on the running daemon: arm it, dream (SIGUSR1), check what the daemon says and records
    and what is left of the folder; clear it, dream again: the work is done."""
    row = DaemonRow(fault, expected=outcomes)
    if _ONLY and not any(o.lower() in fault.lower() for o in _ONLY):
        row.skipped = "not selected"
        return row
    env.fresh()
    (model or env.script)()
    try:
        skip = inject()
        if skip:
            row.skipped = skip
            return row
        row.outcome, said, ev = env.dream()
        wanted = (expect,) if isinstance(expect, str) else expect
        row.reason = said[:240]
        row.reason_ok = any(w.lower() in said.lower() for w in wanted)
        during = C.tree(env.mem)
    finally:
        clear()
    row.alive = env.d.proc is not None and env.d.proc.poll() is None
    if row.outcome == "not run":
        row.recorded = "log (job.not_run)" if row.reason_ok else ""
    else:
        run = env.row_of_last_run() if in_run_log else None
        if run is not None and run.outcome == row.outcome and (run.error or "") == (ev.get("error") or ""):
            row.recorded = "run log"
        elif not in_run_log and row.reason_ok:
            row.recorded = "log"
    row.lost = env.damage(during)
    if C.LOCK in (p.name for p in env.mem.iterdir()) and row.outcome in ("not run", "failed"):
        lock = env.mem / C.LOCK
        if abs(lock.stat().st_mtime - time.time()) < 60 and lock.read_text().strip() == str(env.d.proc.pid
                                                                                         if env.d.proc else ""):
            row.lost.append(".consolidate-lock left held by the daemon")
    if not row.alive:
        return row
    env.script()
    outcome, said, _ = env.dream()
    after = C.tree(env.mem)
    run = env.row_of_last_run()
    row.recovered = (outcome == "changed" and run is not None and run.outcome == "changed" and after != env.before
                     and not C.dangling(env.mem) and not C.temps(env.mem))
    if not row.recovered:
        row.reason += f" | recovery: {outcome}: {said}"[:200]
    return row


def run_daemon(work: Path | None = None, quick: bool = False, only: tuple[str, ...] = ()) -> dict[str, Any]:
    """The faults of the running daemon (one ``memd run`` for all of them: it must outlive each)."""
    _ONLY[:] = only
    stub = StubAPI()
    rows: list[DaemonRow] = []
    t0 = time.monotonic()
    src = smallest_real_folder()
    with tempfile.TemporaryDirectory(prefix="memd-dfaults-", dir=work) as tmp:
        env = DaemonEnv(Path(tmp), stub, src)
        env.start()
        exit_code = -1
        try:
            def arm(spec: str) -> Callable[[], str]:
                def go() -> str:
                    env.fault_file.write_text(spec)
                    return ""
                return go

            def disarm() -> None:
                env.fault_file.unlink(missing_ok=True)

            for spec, words, outcomes in (
                    ("store.write=ENOSPC", "no space left on device", ("failed",)),
                    ("store.write=EACCES", "permission denied", ("failed",)),
                    ("store.write:1=ENOSPC", "no space left on device", ("partial",))):
                if quick and spec != "store.write=ENOSPC":
                    continue
                rows.append(daemon_case(env, f"memory writes fail in a daemon-run dream ({spec})", arm(spec),
                                        disarm, words, outcomes=outcomes))
            rows.append(daemon_case(env, "the model job's child killed mid-apply (store.before_rename:2=kill)",
                                    arm("store.before_rename:2=kill"), disarm, ("process died", "SIGKILL")))

            def history_unwritable() -> None:
                shutil.rmtree(env.state / "history", ignore_errors=True)
                (env.state / "history").write_text("not a folder")

            if not quick:
                rows.append(daemon_case(env, "memd's history folder unwritable (a file in its place)",
                                        history_unwritable, lambda: (env.state / "history").unlink(),
                                        ("history", "not a directory", "not a folder")))
                def hang() -> None:
                    C.clear(stub)
                    stub.script(Reply(body=stub.message(stub.text("late")), delay=JOB_TIMEOUT_S + 30))

                rows.append(daemon_case(env, f"the model job's child hangs (past daemon.job_timeout_s "
                                        f"{JOB_TIMEOUT_S:g} s)", lambda: None, lambda: None, "timed out after",
                                        model=hang))
                holder: list[subprocess.Popen[str]] = []

                def hold_state() -> None:
                    p = subprocess.Popen([sys.executable, "-c", HOLD_STATE, str(env.state / "state.sqlite3")],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                    assert p.stdout is not None and p.stdout.readline().strip() == "held"
                    holder.append(p)

                def release_state() -> None:
                    for p in holder:
                        if p.stdin is not None:
                            p.stdin.close()
                        p.wait(30)
                    holder.clear()

                rows.append(daemon_case(env, "the state file's write lock held by another process",
                                        hold_state, release_state, "the state database is busy",
                                        outcomes=("not run",)))

                def fill_state() -> str:
                    if not env.mounted:
                        return "needs root to mount a tmpfs"
                    _fill(env.state)
                    return ""

                rows.append(daemon_case(env, "memd's state folder on a full disk (tmpfs)", fill_state,
                                        lambda: (env.state / ".filler").unlink(missing_ok=True),
                                        ("no space left on device", "disk is full"),
                                        outcomes=("failed", "not run"), in_run_log=False))
        finally:
            disarm()
            alive = env.d.proc is not None and env.d.proc.poll() is None
            exit_code = env.close()
    stub.close()
    rows = [r for r in rows if r.skipped != "not selected"]
    return {"faults": len(rows), "skipped": sum(1 for r in rows if r.skipped),
            "passed": sum(1 for r in rows if r.ok and not r.skipped), "files_lost": sum(len(r.lost) for r in rows),
            "daemon_alive_at_end": alive, "daemon_exit": exit_code, "seconds": round(time.monotonic() - t0, 1),
            "rows": [r.__dict__ | {"ok": r.ok} for r in rows]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="the CI tier's faults only")
    ap.add_argument("--only", action="append", default=[], help="run the faults whose name holds this")
    ap.add_argument("--daemon", action="store_true", help="only the faults of the running daemon")
    ap.add_argument("--commands", action="store_true", help="only the faults of one-shot commands")
    args = ap.parse_args()
    out: dict[str, Any] = {}
    if not args.daemon:
        res = out["commands"] = run(quick=args.quick, only=tuple(args.only))
        for r in res["rows"]:
            mark = "skip" if r["skipped"] else ("ok" if r["ok"] else "FAIL")
            print(f"{mark:4} exit {r['exit']:>2} {r['fault']}\n       {r['skipped'] or r['reason']}", file=sys.stderr)
    if not args.commands:
        res = out["daemon"] = run_daemon(quick=args.quick, only=tuple(args.only))
        for r in res["rows"]:
            mark = "skip" if r["skipped"] else ("ok" if r["ok"] else "FAIL")
            print(f"{mark:4} {r['outcome']:<9} {r['fault']}\n       {r['skipped'] or r['reason']}"
                  f"{' | ' + '; '.join(r['lost']) if r['lost'] else ''}", file=sys.stderr)
        print(f"daemon alive at the end: {res['daemon_alive_at_end']}, exit after SIGTERM: {res['daemon_exit']}",
              file=sys.stderr)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
