"""Where the daemon's memory goes over a long run, in one process and minutes instead of the soak's
half hour: the daemon's own loop (the reconcile rescan and budget checks of ``Daemon``, its StateStore),
its watcher (watchdog's inotify threads, the debouncer), its scanner thread (``Worker``'s incremental
transcript scans, a StateStore of its own) and a job thread's run-log writes (a third StateStore), over
the soak's workload (``bench/soak.py``: 1,050 projects, session appends, memory writes, budget flips),
iterated as fast as the machine goes.

Every ``--every`` iterations a sample: the process's RSS, Python's traced heap (``tracemalloc``, with
``--trace``), SQLite's own allocator (``sqlite3_memory_used``, the page caches of every connection) and
the state file's size. With ``--trace`` the top growth between the first sample after warm-up and the last
is printed by line. The figures are in docs/reliability.md ("Soak").

Run: ``.venv/bin/python bench/daemon_memory.py --iterations 3000`` (a few minutes; JSON on stdout).
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import os
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from queue import SimpleQueue
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.soak import BUDGET_PROJECTS, Workload, proc_status


def _sqlite_lib() -> Any:
    name = ctypes.util.find_library("sqlite3")
    if not name:
        return None
    try:
        lib = ctypes.CDLL(name)
        lib.sqlite3_memory_used.restype = ctypes.c_int64
        return lib
    except OSError:
        return None


def run(iterations: int, projects: int, every: int, trace: bool, cache_kib: int | None) -> dict[str, Any]:
    from memd import logs
    from memd.clock import SYSTEM
    from memd.config import Config
    from memd.daemon.server import Daemon
    from memd.state import StateStore

    lib = _sqlite_lib()
    samples: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="memd-rss-") as tmp:
        base = Path(tmp)
        t = time.time()
        work = Workload(base, projects, t, t, 1.0, seed=1)
        state_dir = base / "state"
        logs.setup(state_dir, level="info", console=False)
        daemon = Daemon(config=Config(), load_config=Config, claude_dir_for=lambda c: base / "claude",
                        state_dir=state_dir, clock=SYSTEM, log=logs.get_logger("memd.daemon"))
        daemon.open()
        daemon.setup_schedule()
        daemon.worker.start()
        daemon._ensure_watching(initial=True)  # the watcher's threads and inotify, the debouncer
        stop = threading.Event()
        runs_q: SimpleQueue[int | None] = SimpleQueue()

        def run_log() -> None:  # the job thread's share: run rows written and read, as the runner does
            with StateStore.open(state_dir) as st:
                while (n := runs_q.get()) is not None:
                    now = time.time()
                    for i in range(n):
                        name = work.sessions[i % len(work.sessions)]
                        rid = st.start_run("catchup", name, now)
                        st.finish_run(rid, outcome="unchanged", ended=now, summary="nothing new")
                    st.runs(job="catchup", limit=200)

        runner = threading.Thread(target=run_log, name="runs", daemon=True)
        runner.start()
        if trace:
            tracemalloc.start(1)
        first_snap: Any = None
        t0 = time.monotonic()
        for it in range(1, iterations + 1):
            for _ in range(3):
                work.append_session()
            work.memory_write()
            for k in range(2):
                work.flip_budget(work.budget[(it * 2 + k) % BUDGET_PROJECTS])
            daemon.handle_due()  # the writes the watcher saw, once their debounce is over
            if it % 10 == 0:
                daemon._reconcile()  # the rescan (every daemon.reconcile_interval_s)
            for name in work.sessions[it % 3::3]:
                daemon.worker.scan(name)
            runs_q.put(4)  # ~12,000 rows over 3,000 iterations, as the soak's 12,706
            daemon.drain()
            if it % every == 0:
                time.sleep(0.2)  # let the scanner catch up before measuring
                samples.append({"iteration": it, "seconds": round(time.monotonic() - t0, 1),
                                "rss_kb": proc_status(os.getpid(), "VmRSS"),
                                "sqlite_kb": (lib.sqlite3_memory_used() // 1024) if lib else -1,
                                "traced_kb": (tracemalloc.get_traced_memory()[0] // 1024) if trace else -1,
                                "db_kb": sum(p.stat().st_size for p in state_dir.glob("state.sqlite3*")) // 1024,
                                "threads": threading.active_count()})
                print(json.dumps(samples[-1]), file=sys.stderr)
                if trace and first_snap is None and it >= iterations // 4:
                    first_snap = tracemalloc.take_snapshot()
        top: list[str] = []
        if trace and first_snap is not None:
            last = tracemalloc.take_snapshot()
            top = [str(s) for s in last.compare_to(first_snap, "lineno")[:15]]
        stop.set()
        runs_q.put(None)
        if daemon.watcher is not None:
            daemon.watcher.stop()
        daemon.worker.close()
        daemon.worker.join(5)
        daemon.close()
        logs.reset()
    warm = [s for s in samples if s["iteration"] >= iterations // 4]
    return {"iterations": iterations, "projects": projects, "samples": samples, "top_growth": top,
            "after_warmup": {k: [warm[0][k], warm[-1][k]] for k in ("rss_kb", "sqlite_kb", "traced_kb", "db_kb")}
            if warm else {}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iterations", type=int, default=3000)
    ap.add_argument("--projects", type=int, default=1000)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--trace", action="store_true", help="tracemalloc: Python's heap and its top growth")
    args = ap.parse_args()
    print(json.dumps(run(args.iterations, args.projects, args.every, args.trace, None), indent=2))


if __name__ == "__main__":
    main()
