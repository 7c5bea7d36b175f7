"""Transcript scan benchmark (issue 3).

    .venv/bin/python bench/bench_scan.py [--mb 150] [--sessions 1000] [--repeat 3] [--write-docs]

1. Generates a ~150 MB projects tree by duplicating the real transcripts in ../shared/claude-data
   with fresh session ids, uuids and message ids (so no tool can deduplicate its way out of work).
2. Times, in the same run and on the same (warm) files, each in its own child process:
   - memd's full first scan (``scan_all`` into an empty state store),
   - a bare ``json.loads`` loop over the same lines (the floor for a stdlib-json reader),
   - ``ccusage daily --json --offline`` (npm ccusage@17.2.1, installed into a temp prefix when
     absent), pointed at the tree with CLAUDE_CONFIG_DIR.
   The peak memory of each child (ru_maxrss) is reported too.
3. Builds a tree of 1,000 sessions, scans it once, appends one line to one session, and times
   the incremental scan of the whole tree (ms of work and bytes read).

Targets: first scan faster than ccusage and within 1.5x of the bare loop; incremental scan
reads only the new bytes in under 50 ms; peak memory under 100 MB.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "claude-data" / "projects"
CCUSAGE_VERSION = "17.2.1"
_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_IDS = re.compile(rb'"((?:msg|req|toolu)_[A-Za-z0-9]+)"')


# ---------------------------------------------------------------------- generating trees


def _sources() -> list[list[bytes]]:
    """The complete lines of every real transcript (sessions and subagents)."""
    if not SHARED.is_dir():
        sys.exit(f"needs the real transcripts in {SHARED}")
    out = []
    for f in sorted(SHARED.rglob("*.jsonl")):
        data = f.read_bytes()
        lines = [ln for ln in data[: data.rfind(b"\n") + 1].split(b"\n") if ln.strip()]
        if len(lines) >= 5:
            out.append(lines)
    return out


def _copy_lines(lines: list[bytes], copy: int) -> bytes:
    """One session's lines with fresh uuids (consistent within the copy) and unique message ids."""
    mapping: dict[bytes, bytes] = {}

    def new_uuid(m: re.Match[bytes]) -> bytes:
        old = m.group(0)
        if old not in mapping:
            mapping[old] = str(uuid.uuid4()).encode()
        return mapping[old]

    suffix = f"c{copy}".encode()
    buf = bytearray()
    for ln in lines:
        ln = _UUID.sub(new_uuid, ln)
        ln = _IDS.sub(lambda m: b'"' + m.group(1) + suffix + b'"', ln)
        buf += ln + b"\n"
    return bytes(buf)


def make_big_tree(dest: Path, target_mb: float, projects: int = 12) -> tuple[int, int, int]:
    """(bytes, lines, sessions) of a generated tree under dest/projects."""
    sources = _sources()
    total = lines = sessions = copy = 0
    target = int(target_mb * 1024 * 1024)
    while total < target:
        for src in sources:
            if total >= target:
                break
            copy += 1
            folder = dest / "projects" / f"-home-bench-project{copy % projects:02d}"
            folder.mkdir(parents=True, exist_ok=True)
            data = _copy_lines(src, copy)
            (folder / f"{uuid.uuid4()}.jsonl").write_bytes(data)
            total += len(data)
            lines += len(src)
            sessions += 1
    return total, lines, sessions


def make_many_sessions(dest: Path, n: int, projects: int = 20) -> list[Path]:
    """n sessions of realistic small size (30 lines each), a quarter with a subagent folder."""
    sources = _sources()
    out: list[Path] = []
    for i in range(n):
        src = sources[i % len(sources)]
        start = (i * 7) % max(1, len(src) - 30)
        lines = src[start: start + 30]
        folder = dest / "projects" / f"-home-bench-many{i % projects:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        sid = str(uuid.uuid4())
        p = folder / f"{sid}.jsonl"
        p.write_bytes(_copy_lines(lines, i))
        if i % 4 == 0:
            sub = folder / sid / "subagents"
            sub.mkdir(parents=True)
            (sub / "agent-a1b2c3d.jsonl").write_bytes(_copy_lines(lines[:5], i + n))
        out.append(p)
    return out


# ---------------------------------------------------------------------- child-process runs

_CHILD_SCAN = r"""
import json, sys, time, resource
from pathlib import Path
from memd.config import Config
from memd.state import StateStore
from memd.transcripts.scan import scan_all
claude, state = Path(sys.argv[1]), Path(sys.argv[2])
store = StateStore.open(state)
t = time.perf_counter()
res = scan_all(claude, store, Config(), now=time.time())
dt = time.perf_counter() - t
store.close()
print(json.dumps({"seconds": dt, "records": sum(r.records for r in res), "bad": sum(r.bad_lines for r in res),
                  "bytes": sum(r.new_bytes for r in res)}))
"""

_CHILD_BARE = r"""
import json, sys, time
from pathlib import Path
root = Path(sys.argv[1])
files = sorted(root.rglob("*.jsonl"))
t = time.perf_counter()
n = 0
for f in files:
    with open(f, "rb") as fh:
        for line in fh:
            try:
                json.loads(line)
                n += 1
            except ValueError:
                pass
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "records": n}))
"""


def _run_measured(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, int, str]:
    """(wall seconds, peak RSS in KB, stdout) of a child process; wait4 gives this child's own
    rusage (RUSAGE_CHILDREN would be the maximum over every child so far)."""
    t = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env if env is not None else dict(os.environ),
                         file_actions=[(os.POSIX_SPAWN_OPEN, 1, _OUT, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                                        0o600),
                                       (os.POSIX_SPAWN_OPEN, 2, _ERR, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                                        0o600)])
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t
    out = Path(_OUT).read_text(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{argv[:3]} failed: {Path(_ERR).read_text(errors='replace')[-2000:]}")
    return wall, ru.ru_maxrss, out


_TMP = tempfile.mkdtemp(prefix="memd-bench-io-")
_OUT = os.path.join(_TMP, "out")
_ERR = os.path.join(_TMP, "err")


def ccusage_bin(prefix: Path) -> Path:
    exe = prefix / "node_modules" / ".bin" / "ccusage"
    if not exe.exists():
        npm = shutil.which("npm")
        if npm is None:
            sys.exit("npm is needed to install ccusage")
        subprocess.run([npm, "install", "--prefix", str(prefix), f"ccusage@{CCUSAGE_VERSION}"], check=True,
                       stdout=subprocess.DEVNULL)
    return exe


def _warm(root: Path) -> None:
    for f in root.rglob("*.jsonl"):
        with open(f, "rb") as fh:
            while fh.read(1 << 22):
                pass


def bench_first_scan(tree: Path, repeat: int, ccusage_prefix: Path) -> dict[str, Any]:
    py = sys.executable
    _warm(tree)
    env = dict(os.environ, CLAUDE_CONFIG_DIR=str(tree), NO_COLOR="1")
    exe = ccusage_bin(ccusage_prefix)
    scan_s: list[float] = []
    scan_rss: list[int] = []
    bare_s: list[float] = []
    bare_rss: list[int] = []
    cc_s: list[float] = []
    cc_rss: list[int] = []
    scan_wall: list[float] = []
    info: dict[str, Any] = {}
    for i in range(repeat):
        state = Path(tempfile.mkdtemp(prefix="memd-bench-state-"))
        wall, rss, out = _run_measured([py, "-c", _CHILD_SCAN, str(tree), str(state)])
        r = json.loads(out)
        scan_s.append(r["seconds"])
        scan_wall.append(wall)
        scan_rss.append(rss)
        info = r
        shutil.rmtree(state)
        _, rss, out = _run_measured([py, "-c", _CHILD_BARE, str(tree / "projects")])
        bare_s.append(json.loads(out)["seconds"])
        bare_rss.append(rss)
        wall, rss, out = _run_measured([str(exe), "daily", "--json", "--offline"], env)
        json.loads(out)
        cc_s.append(wall)
        cc_rss.append(rss)
        print(f"  run {i + 1}: memd scan {scan_s[-1]:.2f}s, bare loop {bare_s[-1]:.2f}s, "
              f"ccusage {cc_s[-1]:.2f}s", flush=True)
    return {
        "scan_s": statistics.median(scan_s), "scan_wall_s": statistics.median(scan_wall),
        "bare_s": statistics.median(bare_s), "ccusage_s": statistics.median(cc_s),
        "scan_rss_mb": max(scan_rss) / 1024, "bare_rss_mb": max(bare_rss) / 1024,
        "ccusage_rss_mb": max(cc_rss) / 1024, "records": info["records"], "bytes": info["bytes"],
    }


def bench_incremental(tree: Path, sessions: list[Path]) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    logging.getLogger("memd.transcripts").setLevel(logging.ERROR)  # the copied malformed fixture
    from memd.config import Config
    from memd.state import StateStore
    from memd.transcripts.scan import scan_all

    cfg = Config()
    state = Path(tempfile.mkdtemp(prefix="memd-bench-state-"))
    store = StateStore.open(state)
    t = time.perf_counter()
    first = scan_all(tree, store, cfg, now=time.time())
    first_s = time.perf_counter() - t
    files = sum(len(r.sessions) for r in first)
    # one appended line in one session
    target = sessions[len(sessions) // 2]
    line = sessions[0].read_bytes().split(b"\n")[1] + b"\n"
    times: list[float] = []
    read: list[int] = []
    recs: list[int] = []
    cpu_times: list[float] = []
    for _ in range(5):
        with open(target, "ab") as f:
            f.write(line)
        t, c = time.perf_counter(), time.process_time()
        res = scan_all(tree, store, cfg, now=time.time())
        times.append(time.perf_counter() - t)
        cpu_times.append(time.process_time() - c)
        read.append(sum(r.new_bytes for r in res))
        recs.append(sum(r.records for r in res))
    # nothing new at all
    t = time.perf_counter()
    scan_all(tree, store, cfg, now=time.time())
    idle = time.perf_counter() - t
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    store.close()
    shutil.rmtree(state)
    return {"files": files, "first_s": first_s, "incr_ms": statistics.median(times) * 1000,
            "incr_cpu_ms": statistics.median(cpu_times) * 1000,
            "incr_max_ms": max(times) * 1000, "bytes_read": read[-1], "line_bytes": len(line),
            "records": recs[-1], "idle_ms": idle * 1000, "self_rss_mb": cpu.ru_maxrss / 1024}


# ---------------------------------------------------------------------- report


def report(big: dict[str, Any], inc: dict[str, Any], size: int, sessions: int, many: int, cmd: str) -> str:
    mb = size / (1024 * 1024)
    r_bare = big["scan_s"] / big["bare_s"]
    r_cc = big["ccusage_s"] / big["scan_s"]

    def row(name: str, secs: float, rss: float) -> str:
        return f"| {name} | {secs:.2f} s | {mb / secs:.0f} MB/s | {secs / big['scan_s']:.2f}x | {rss:.0f} MB |"

    rows = "\n".join([
        row("memd `scan_all` (work only)", big["scan_s"], big["scan_rss_mb"]),
        row("bare `json.loads` loop over the same lines", big["bare_s"], big["bare_rss_mb"]),
        row(f"`ccusage daily --json --offline` ({CCUSAGE_VERSION}, whole process)", big["ccusage_s"],
            big["ccusage_rss_mb"]),
    ])
    return f"""## Transcript scan

Command: `{cmd}` (2-core shared machine, files warm in the page cache; medians of the runs).

First full scan of a generated {mb:.0f} MB tree ({sessions} sessions, {big['records']:,} records; real
transcripts duplicated with fresh ids), each tool in its own child process:

| | time | throughput | time vs memd | peak RSS |
|---|---|---|---|---|
{rows}

- memd / bare loop: **{r_bare:.2f}x** (target <= 1.5x). ccusage / memd: **{r_cc:.2f}x** (target > 1: memd faster).
- memd child wall time including interpreter start and imports: {big['scan_wall_s']:.2f} s.
- Peak memory of the memd scan: **{big['scan_rss_mb']:.0f} MB** (target < 100 MB).

Incremental scan of a tree of {many:,} sessions ({inc['files']:,} transcript files with subagents) after
one appended line of {inc['line_bytes']:,} bytes: **{inc['incr_ms']:.1f} ms** wall (median of 5, max
{inc['incr_max_ms']:.1f} ms; {inc['incr_cpu_ms']:.1f} ms CPU), **{inc['bytes_read']:,} bytes read**
({inc['records']} record); a pass with
nothing new: {inc['idle_ms']:.1f} ms. Target: only the new bytes, under 50 ms. (First scan of that tree:
{inc['first_s']:.2f} s.)
"""


def write_docs(section: str) -> None:
    doc = ROOT / "docs" / "benchmarks.md"
    text = doc.read_text(encoding="utf-8") if doc.exists() else "# Benchmarks\n"
    head = "## Transcript scan"
    start = text.find(head)
    if start >= 0:
        nxt = text.find("\n## ", start + len(head))
        text = text[:start] + section.rstrip() + "\n" + (text[nxt:] if nxt >= 0 else "")
    else:
        text = text.rstrip() + "\n\n" + section
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(text, encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    ap.add_argument("--mb", type=float, default=150.0, help="size of the generated tree (MB)")
    ap.add_argument("--sessions", type=int, default=1000, help="sessions in the incremental tree")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write-docs", action="store_true", help="write the results into docs/benchmarks.md")
    ap.add_argument("--keep", action="store_true", help="keep the generated trees")
    args = ap.parse_args()
    cmd = "python bench/bench_scan.py" + "".join(
        f" --{k.replace('_', '-')} {v}" for k, v in (("mb", args.mb), ("sessions", args.sessions),
                                                     ("repeat", args.repeat))) + (
        " --write-docs" if args.write_docs else "")
    base = Path(tempfile.mkdtemp(prefix="memd-bench-"))
    try:
        print(f"generating {args.mb:.0f} MB tree in {base / 'big'} ...", flush=True)
        size, lines, sessions = make_big_tree(base / "big", args.mb)
        print(f"  {size / 1e6:.0f} MB, {lines:,} lines, {sessions} sessions", flush=True)
        big = bench_first_scan(base / "big", args.repeat, Path(tempfile.gettempdir()) / "memd-bench-ccusage")
        if not args.keep:
            shutil.rmtree(base / "big")
        print(f"generating {args.sessions} sessions ...", flush=True)
        many = make_many_sessions(base / "many", args.sessions)
        inc = bench_incremental(base / "many", many)
        section = report(big, inc, size, sessions, args.sessions, cmd)
        print()
        print(section)
        if args.write_docs:
            write_docs(section)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(_TMP, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
