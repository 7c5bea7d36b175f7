"""Concurrent writers: Claude Code writing memory while memd dreams, catches up, rebuilds and undoes.

A writer process does what Claude Code does to a memory folder, as fast as a busy session: it writes
whole topic files (atomically, through a temp file and a rename, or in place), edits them (read, add a
line, write back), renames and deletes some, and appends entries to MEMORY.md (in place, as its Edit
tool does). Every write carries a unique token (``w-000123.``) and is logged. Meanwhile memd runs, in
a loop, a dream (a scripted model that edits the same files and creates its own), a catch-up (over a
session that keeps growing), a rebuild of the index and an undo of the newest run.

When the writer stops, every write is checked: it is kept when its token is live in its file, or when
a later whole-file write of the writer's replaced the same file (an edit keeps the lines it read, so
every token since the last whole write must be there; MEMORY.md must hold its newest append). A write
that only a history snapshot still holds is lost. The figure that matters: zero lost.

Run: ``.venv/bin/python bench/concurrent_writers.py --ops 3000`` (figures in docs/reliability.md).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

STABLE = 6  # files the writer edits and links from MEMORY.md, never deletes
VOLATILE = 6  # files it also renames and deletes


def _topic(name: str, token: str, extra: str = "") -> str:
    return (f"---\nname: {name}\ndescription: what the session learnt about {name}\ntype: user\n---\n"
            f"Notes:\n{extra}- {token}\n")


# --------------------------------------------------------------------------- the writer (Claude Code)


def writer(folder: Path, ops: int, log_path: Path, seed: int, pause_s: float) -> None:
    """Claude Code's side: ``ops`` writes to ``folder``, each logged as one JSON line."""
    rng = random.Random(seed)
    log = log_path.open("a", buffering=1)
    seq = 0

    def token() -> str:
        nonlocal seq
        seq += 1
        return f"w-{seq:06d}."

    def write(path: Path, text: str, atomic: bool) -> None:
        if atomic:
            tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}.{seq}")
            tmp.write_text(text)
            os.replace(tmp, path)
        else:
            with path.open("w") as f:
                f.write(text)

    def record(op: str, rel: str, tok: str | None) -> None:
        log.write(json.dumps({"seq": seq, "op": op, "path": rel, "token": tok}) + "\n")

    for i in range(ops):
        kind = rng.choices(["write", "edit", "index", "rename", "delete"], [3, 4, 3, 1, 1])[0]
        atomic = rng.random() < 0.5
        if kind in ("write", "edit"):
            pool = [f"user_cc_s{k}.md" for k in range(STABLE)] + [f"user_cc_v{k}.md" for k in range(VOLATILE)]
            rel = rng.choice(pool)
            path = folder / rel
            tok = token()
            try:
                old = path.read_text() if kind == "edit" else None
            except OSError:
                old = None
            text = (old.rstrip("\n") + f"\n- {tok}\n") if old else _topic(rel[:-3], tok)
            write(path, text, atomic)
            record(kind if old else "write", rel, tok)  # an edit of a missing file writes it afresh
        elif kind == "index":
            k = rng.randrange(STABLE)
            tok = token()
            path = folder / "MEMORY.md"
            try:
                old = path.read_text()
            except OSError:
                old = ""
            line = f"- [CC {k}](user_cc_s{k}.md) — note {tok}\n"
            with path.open("w") as f:  # Claude Code's Edit: read, change, write in place
                f.write((old if old.endswith("\n") or not old else old + "\n") + line)
            record("index", "MEMORY.md", tok)
        elif kind == "rename":
            a, b = rng.sample([f"user_cc_v{k}.md" for k in range(VOLATILE)], 2)
            if (folder / a).exists() and not (folder / b).exists():
                try:
                    os.rename(folder / a, folder / b)
                except OSError:
                    continue
                token()
                record("rename", f"{a}>{b}", None)
        else:
            rel = f"user_cc_v{rng.randrange(VOLATILE)}.md"
            try:
                (folder / rel).unlink()
            except FileNotFoundError:
                continue
            token()
            record("delete", rel, None)
        if i % 50 == 0:
            time.sleep(pause_s * 10)
        time.sleep(rng.uniform(0, pause_s))
    log.close()


# --------------------------------------------------------------------------- the check


def check(folder: Path, log_path: Path) -> dict[str, Any]:
    """Replay the writer's log. A topic file must hold every token written since the writer last
    replaced it whole (an edit adds a line to what it read, so it keeps the earlier ones); MEMORY.md
    must hold the newest append (a rebuild may condense older entries of the same file)."""
    live: dict[str, list[dict[str, Any]]] = {}  # path -> the writer's writes that must still be there
    writes = 0
    for line in log_path.read_text().splitlines():
        e = json.loads(line)
        if e["op"] == "edit":
            writes += 1
            live.setdefault(e["path"], []).append(e)
        elif e["op"] in ("write", "index"):
            writes += 1
            live[e["path"]] = [e]
        elif e["op"] == "delete":
            live.pop(e["path"], None)
        elif e["op"] == "rename":
            a, b = e["path"].split(">")
            moved = live.pop(a, None)
            if moved is not None:
                live[b] = [{**m, "path": b} for m in moved]
            else:
                live.pop(b, None)
    lost = []
    for rel, es in sorted(live.items()):
        try:
            text = (folder / rel).read_text()
        except OSError:
            text = ""
        lost += [{"file": rel, "token": e["token"], "op": e["op"]} for e in es if e["token"] not in text]
    return {"writer_ops": sum(1 for _ in log_path.read_text().splitlines()), "writes": writes,
            "files_checked": len(live), "tokens_checked": sum(len(es) for es in live.values()), "lost": lost}


# --------------------------------------------------------------------------- memd's side


def run(ops: int, seed: int = 1, work: Path | None = None, pause_s: float = 0.05) -> dict[str, Any]:
    """The campaign: a writer process doing ``ops`` operations while memd runs its jobs in a loop."""
    os.environ.setdefault("ANTHROPIC_API_KEY", "test")
    os.environ.pop("ANTHROPIC_BASE_URL", None)
    from bench import campaign as C
    from memd.core.rebuild import NORMALISE
    from memd.jobs.catchup import catchup_project
    from memd.jobs.runner import run_job
    from memd.layout import Project
    from memd.maintenance import rebuild_project, undo_project
    from memd.state import StateStore
    from tests.plugins.stub_api import StubAPI

    stub = StubAPI()
    rng = random.Random(seed)
    t0 = time.monotonic()
    jobs: Counter[str] = Counter()
    with tempfile.TemporaryDirectory(prefix="memd-writers-", dir=work) as tmp:
        root = Path(tmp)
        claude, state_dir = root / "claude", root / "state"
        folders = C.real_memory_folders()
        name = "-home-dev-busy"
        if folders:
            p = C.copy_project(min(folders, key=lambda f: sum(1 for _ in f.iterdir())), claude, name)
        else:
            d = claude / "projects" / name
            (d / "memory").mkdir(parents=True)
            p = Project(name, d, d / "memory")
        mem = p.memory_dir
        for k in range(STABLE):
            (mem / f"user_cc_s{k}.md").write_text(_topic(f"user_cc_s{k}", "w-000000."))
        session = p.dir / "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee.jsonl"
        cfg = C.config(stub.base_url, max_delete_share=0.5)
        log_path = root / "writer.log"
        import anthropic  # noqa: F401  (imported before the writer starts: the first dream is not slower)

        proc = subprocess.Popen([sys.executable, __file__, "--writer", str(mem), str(ops), str(log_path),
                                 str(seed), str(pause_s)])
        n = 0
        with StateStore.open(state_dir) as state:
            while proc.poll() is None:
                n += 1
                job = ("dream", "catchup", "rebuild", "undo")[n % 4]
                C.clear(stub)
                try:
                    if job == "dream":
                        k = rng.randrange(STABLE)
                        stub.script(stub.message(
                            stub.memory("str_replace", path=f"/memories/user_cc_s{k}.md", old_str="Notes:",
                                        new_str=f"Notes: (memd reviewed these, run {n})"),
                            stub.memory("create", path=f"/memories/project_memd_{n}.md", file_text=(
                                f"---\nname: memd {n}\ndescription: a fact a dream saved ({n})\ntype: project\n"
                                f"---\nThe release train {n} leaves on 2026-12-0{1 + n % 8}.\n"))),
                            stub.message(stub.text("done")))
                        res = run_job("dream", C.job_context(cfg, claude, state_dir, state), [p])
                        jobs[f"dream {res.outcomes[0].outcome if res.outcomes else 'skipped'}"] += 1
                    elif job == "catchup":
                        with session.open("a") as f:
                            f.write(json.dumps({"type": "user", "uuid": f"u{n}", "sessionId": "s",
                                                "timestamp": "2026-11-30T10:00:00Z", "message": {
                                                    "role": "user", "content": f"Remember: the build {n} is green."}})
                                    + "\n")
                        os.utime(session, (C.OLD, C.OLD))
                        stub.script(stub.message(stub.memory("create", path=f"/memories/project_build_{n}.md",
                                                             file_text=(f"---\nname: build {n}\ndescription: build "
                                                                        f"{n} is green\ntype: project\n---\n"
                                                                        f"Build {n} was green on 2026-11-30.\n"))),
                                    stub.message(stub.text("saved")))
                        out = catchup_project(C.job_context(cfg, claude, state_dir, state), p)
                        jobs[f"catchup {out.outcome}"] += 1
                    elif job == "rebuild":
                        r = rebuild_project(p, cfg, state_dir, dry_run=False, mode=NORMALISE)
                        done = "written" if r.written else "unchanged" if not r.changed else (
                            "not written: " + (r.reasons[-1] if r.reasons else "?")[:60])
                        jobs[f"rebuild {done}"] += 1
                    else:
                        u, rb = undo_project(p, cfg, state_dir, None, dry_run=False)
                        jobs["undo" if u.restored or u.removed else "undo (nothing to undo)"] += 1
                        if rb is not None and not rb.written and rb.changed:
                            why = (rb.reasons[-1] if rb.reasons else "?")[:60]
                            jobs[f"undo's index rebuild not written: {why}"] += 1
                except Exception as e:  # a job's failure is counted; the campaign goes on
                    jobs[f"{job} error {type(e).__name__}"] += 1
        proc.wait()
        res = check(mem, log_path)
        # a link to a file the writer deleted or renamed is the writer's doing (as a user's rm would be)
        mine = [m for m in C.dangling(mem) if "user_cc_" not in m]
        res["dangling_links_left_by_memd"] = mine
        res["temp_files"] = C.temps(mem)
    stub.close()
    res.update({"memd_jobs": dict(jobs), "seconds": round(time.monotonic() - t0, 1)})
    return res


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--writer":
        folder, ops, log, seed, pause = sys.argv[2:7]
        writer(Path(folder), int(ops), Path(log), int(seed), float(pause))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", type=int, default=3000, help="the writer's operations")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pause", type=float, default=0.05, help="the writer's longest pause between operations (s)")
    args = ap.parse_args()
    print(json.dumps(run(args.ops, args.seed, pause_s=args.pause), indent=2))


if __name__ == "__main__":
    main()
