"""What serving the viewer costs the daemon, and what a project's timeline page costs (issue 26).

In a regular install (``bench/regular.py``), the real `memd run` process on a temp HOME:

1. The daemon's resident memory (VmRSS) once it is ready and has measured its projects, with
   ``[ui] serve = false`` (the baseline, measured in the same run) and ``true``: the viewer's stack
   (Jinja2, MarkupSafe, http.server, the pages) is imported only when serving is on.
2. The project page served by that daemon over HTTP (wall time of a GET, median of --gets): a project
   whose timeline holds 50 runs, each applied with its history record and diff (the run log naming each
   run), against the same memory folder with no runs (the baseline, in the same run).

    .venv/bin/python bench/bench_ui_daemon.py [--rounds 3] [--gets 20] [--venv DIR] [--no-write]

Results go to docs/benchmarks.md ("## memd ui served by the daemon").
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_check import write_doc
from regular import ROOT, build

HEAD = "## memd ui served by the daemon"
SEED = r"""
import sys, time
from pathlib import Path
from memd import history
from memd.state import StateStore
state, mem, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
with StateStore.open(state) as st:
    for i in range(n):
        name = f"dream-bench-{i:03d}"
        rid = st.start_run("dream", "-home-u-runs", time.time())
        before = history.snapshot_before(state, "-home-u-runs", mem, "dream", run=name)
        text = (mem / "note_1.md").read_text() + f"run {i}: one more line\n"
        (mem / "note_1.md").write_text(text)
        history.record_after(state, "-home-u-runs", before, {"note_1.md": text.encode()}, "dream", name,
                             f"dream {name}: ~1")
        st.finish_run(rid, outcome="changed", ended=time.time(), changed=1, tokens_in=12000, tokens_out=800,
                      cost_usd=0.0016, summary=f"~1 - run {i}", history_run=name)
"""


def _folder(mem: Path) -> None:
    mem.mkdir(parents=True)
    lines = ["# Memory", ""]
    for i in range(1, 21):
        (mem / f"note_{i}.md").write_text(f"---\nname: note {i}\ndescription: note {i}\ntype: project\n---\n"
                                          + "".join(f"line {j} of note {i}\n" for j in range(30)))
        lines.append(f"- [Note {i}](note_{i}.md) — what note {i} holds")
    (mem / "MEMORY.md").write_text("\n".join(lines) + "\n")


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def _wait(log: Path, event: str, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"memd run exited {proc.returncode}")
        if log.exists() and any(_event(line) == event for line in log.read_text().splitlines()):
            return
        time.sleep(0.1)
    raise RuntimeError(f"no {event} within {timeout} s")


def _event(line: str) -> str | None:
    try:
        return json.loads(line).get("event")
    except ValueError:
        return None


def _get(port: int, path: str, cookie: str = "") -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}", **({"Cookie": cookie} if cookie else {})})
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, (r.getheader("Set-Cookie") or "").split(";", 1)[0], body


class Daemon:
    def __init__(self, bindir: Path, home: Path, serve: bool) -> None:
        self.home, self.state = home, home / ".local" / "state" / "memd"
        cfg = home / ".config" / "memd" / "config.toml"
        cfg.parent.mkdir(parents=True, exist_ok=True)
        cfg.write_text(f"[ui]\nserve = {'true' if serve else 'false'}\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_", "XDG_"))}
        env.update(HOME=str(home), XDG_STATE_HOME=str(home / ".local" / "state"),
                   XDG_CONFIG_HOME=str(home / ".config"), CLAUDE_CONFIG_DIR=str(home / ".claude"))
        log = self.state / "memd.log"
        if log.exists():
            log.unlink()
        self.proc = subprocess.Popen([str(bindir / "memd"), "run", "--console", "no"], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait(log, "ui.served" if serve else "daemon.ready", self.proc)
        _wait(log, "daemon.ready", self.proc)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gets", type=int, default=20)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--venv", type=Path)
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="memd-ui-bench-") as tmp:
        root = Path(tmp)
        bindir = build(a.venv or root / "regular-venv")
        subprocess.run([str(bindir / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        f"{ROOT}[ui]"], check=True, stderr=subprocess.DEVNULL)  # what `pip install '.[ui]'` adds
        home = root / "home"
        projects = home / ".claude" / "projects"
        _folder(projects / "-home-u-runs" / "memory")
        _folder(projects / "-home-u-none" / "memory")
        state = home / ".local" / "state" / "memd"
        state.mkdir(parents=True)
        subprocess.run([str(bindir / "python"), "-c", SEED, str(state), str(projects / "-home-u-runs" / "memory"),
                        str(a.runs)], check=True)
        rss: dict[bool, list[int]] = {False: [], True: []}
        for _ in range(a.rounds):
            for serve in (False, True):
                d = Daemon(bindir, home, serve)
                time.sleep(2.0)  # its first reconcile has measured the projects
                rss[serve].append(_rss_kb(d.proc.pid))
                d.stop()
        d = Daemon(bindir, home, True)
        try:
            rec = json.loads((state / "ui-url.json").read_text())
            port = rec["port"]
            _, cookie, _ = _get(port, "/?" + urlsplit(rec["url"]).query)
            times: dict[str, list[float]] = {"-home-u-runs": [], "-home-u-none": []}
            sizes: dict[str, int] = {}
            for _ in range(a.gets):
                for name in times:
                    t0 = time.perf_counter()
                    status, _, body = _get(port, f"/project/{name}", cookie)
                    times[name].append(time.perf_counter() - t0)
                    assert status == 200, status
                    sizes[name] = len(body)
            entries = _get(port, "/project/-home-u-runs", cookie)[2].count(b'<li class="entry"')
        finally:
            d.stop()
    off, on = statistics.median(rss[False]) / 1024, statistics.median(rss[True]) / 1024
    runs_ms = statistics.median(times["-home-u-runs"]) * 1000
    none_ms = statistics.median(times["-home-u-none"]) * 1000
    load = os.getloadavg()[0]
    section = "\n".join([
        HEAD, "",
        f"Command: `.venv/bin/python bench/bench_ui_daemon.py --rounds {a.rounds} --gets {a.gets} --runs {a.runs}` "
        f"({time.strftime('%Y-%m-%d')}, a regular install, the real `memd run` on a temp HOME with two projects of "
        f"20 topic files; the shared 2-core machine at a load average of {load:.1f}; medians).", "",
        "| | baseline | measured | ratio |", "|---|---|---|---|",
        f"| daemon RSS once ready: `[ui] serve = false` vs `true` | {off:.1f} MB | {on:.1f} MB | {on / off:.2f} |",
        f"| project page over HTTP: no runs vs a timeline of {entries} runs, each applied with its diff "
        f"| {none_ms:.1f} ms | {runs_ms:.1f} ms | {runs_ms / none_ms:.2f} |", "",
        f"- Serving costs the daemon {on - off:.1f} MB (Jinja2, MarkupSafe, http.server and the pages, imported only "
        "when `[ui] serve = true`); off, it imports none of them (tests/test_ui_daemon.py).",
        f"- The timeline page reads the run log's last 50 rows and the history's records, and diffs each applied "
        f"run's changes (`history.changes_between`: one repository open, trees compared by id, only changed files "
        f"read): {sizes['-home-u-runs'] / 1024:.0f} KB of HTML against {sizes['-home-u-none'] / 1024:.0f} KB. "
        "Reading both whole snapshots of every run, as the first version did, took 229 ms (21x) on 2026-12-02.", ""])
    print(section)
    assert entries == a.runs
    if not a.no_write:
        write_doc(section, HEAD)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
