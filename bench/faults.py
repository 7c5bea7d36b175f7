"""Faults: every write path refused (no space, permission, an immutable file, the file-size limit), the
state file locked, corrupt or replaced by a folder, the history removed, the projects root removed, and
the model API failing every way. Each fault is injected under a real ``memd dream`` command (a process
of its own, the real SDK against the loopback stub), then removed, and the same command run again.

For every fault the campaign records: the exit code (non-zero where the command could not do its work:
1 failed/partial, 3 not run), whether the output names the true reason, whether any memory file was lost
or changed half-way (every file is as before, or as the recovered run leaves it), and whether the next
run, without the fault, does the work (exit 0, ``changed``).

Faults that need root (a small tmpfs, ``chattr +i``) are skipped elsewhere, and said so.
Run: ``.venv/bin/python bench/faults.py`` (figures in docs/reliability.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
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
        if src is not None:
            C.copy_project(src, self.claude, NAME)
        else:
            C.write_tree(self.mem, {"MEMORY.md": b"- [A](user_a.md) - a\n",
                                    **{f"user_{c}.md": f"---\nname: {c}\ndescription: {c}\ntype: user\n---\n{c}.\n"
                                       .encode() for c in "abcdefghijkl"}})
        self.before = C.tree(self.mem)

    def script(self) -> None:
        self.seed += 1
        C.clear(self.stub)
        self.stub.script(*C.dream_script(self.stub, self.before, self.seed, delete=False))

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
    folders = C.real_memory_folders()
    src = min(folders, key=lambda f: sum(1 for _ in f.iterdir())) if folders else None
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
            rows.append(scenario(env, src, f"memory writes fail ({spec})", nothing, nothing, words,
                                 extra_env=fault_env(spec)))
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
                                 unlock_state, ("locked", "busy")))

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="the CI tier's faults only")
    ap.add_argument("--only", action="append", default=[], help="run the faults whose name holds this")
    args = ap.parse_args()
    res = run(quick=args.quick, only=tuple(args.only))
    for r in res["rows"]:
        mark = "skip" if r["skipped"] else ("ok" if r["ok"] else "FAIL")
        print(f"{mark:4} exit {r['exit']:>2} {r['fault']}\n       {r['skipped'] or r['reason']}", file=sys.stderr)
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
