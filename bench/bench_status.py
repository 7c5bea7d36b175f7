"""Benchmark `memd status` over projects it has not cached, against `check --all` on the same tree.

`status` wrote the shared check cache after every project (the whole file re-read and rewritten each
time: quadratic); it now writes it once per run, as `check --all` does. Trees of small generated
memory folders (five topic files each); CPU time (user + system) of a first run (cache removed) of
each command, median of --runs. Target: linear, at most 1.2x `check --all`. Both run as users run
them: a regular install built from this checkout (``bench/regular.py``), its ``memd`` script. Each
project has a session transcript with its working folder (status reads the newest one's head to tell
whether Claude Code's memory is off there). Results go to docs/benchmarks.md ("## memd status").

    .venv/bin/python bench/bench_status.py [--runs N] [--sizes 1000,10000] [--venv DIR] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_check import fit, make_folder, run_once, write_doc
from regular import build


def tree(root: Path, n: int) -> Path:
    rng = random.Random(n)
    claude = root / f"claude-{n}"
    for i in range(n):
        folder = claude / "projects" / f"-home-u-p{i:05d}"
        make_folder(folder / "memory", 5, rng, 5)
        rec = {"type": "user", "uuid": "u1", "sessionId": SESSION, "cwd": f"/home/u/p{i:05d}",
               "timestamp": "2026-12-01T10:00:00Z", "message": {"role": "user", "content": "hello"}}
        (folder / f"{SESSION}.jsonl").write_text(json.dumps(rec) + "\n" + "x" * 20_000 + "\n")
    return claude


SESSION = "0b0e6b2e-9a53-4a4e-8c39-5ad0c6c2d3a1"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--venv", type=Path, help="a regular venv to reuse (memd is reinstalled into it)")
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    rows: list[tuple[int, float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        memd = [str(build(a.venv or root / "regular-venv") / "memd")]
        os.environ["XDG_STATE_HOME"] = str(root / "state")
        os.environ.pop("CLAUDE_CONFIG_DIR", None)
        for n in sizes:
            claude = tree(root, n)
            cache = root / "state" / "memd" / "cache"
            res: dict[str, list[float]] = {"status": [], "check": []}
            for _ in range(a.runs):
                for name, argv in (("status", ["status", "--format", "json"]), ("check", ["check", "--all"])):
                    shutil.rmtree(cache, ignore_errors=True)
                    _, cpu = run_once([*memd, "--claude-dir", str(claude), *argv])
                    res[name].append(cpu)
            s, c = statistics.median(res["status"]), statistics.median(res["check"])
            rows.append((n, s, c))
            print(f"{n:>6} projects: status {s:6.2f} s CPU, check --all {c:6.2f} s CPU, ratio {s / c:4.2f}")
    fixed, per = fit([r[0] for r in rows], [r[1] for r in rows])
    lines = ["| projects | `status` first run (CPU s) | `check --all` first run (CPU s) | ratio |", "|---|---|---|---|"]
    lines += [f"| {n:,} | {s:.2f} | {c:.2f} | {s / c:.2f} |" for n, s, c in rows]
    section = ("## memd status\n\n"
               "`memd status` over projects it has not cached (five topic files and a session transcript each; "
               "a regular install; the check cache removed "
               f"before each run; CPU time, median of {a.runs}), against `check --all` on the same tree. Fit: "
               f"{fixed:.2f} s + {per * 1000:.2f} ms per project. Before this, status wrote the whole cache after "
               "every project: 200 projects 2.9 s, 1,000 28 s, 2,000 92 s CPU.\n\n") + "\n".join(lines) + "\n"
    print(section)
    if not a.no_write:
        write_doc(section, "## memd status")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
