"""Benchmark what the viewer's peer check costs a request (memd.ui.peer, docs/ui.md "Safety model").

In a regular install built from this checkout (``bench/regular.py``): this file runs again in that venv
with ``--child``. The real server (``memd.ui.server.Running``) serves ``/static/ui.css`` over loopback
with the token cookie; each round times ``--gets`` requests with the peer check (the kernel asked whose
the connecting socket is) and as many without it (the baseline: the check replaced by nothing),
interleaved. Also timed alone: one sock_diag lookup (what the check does) and one read of
``/proc/net/tcp`` (the fallback), on this machine's number of TCP sockets.

    .venv/bin/python bench/bench_ui_peer.py [--rounds 7] [--gets 200] [--venv DIR] [--no-write]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HEAD = "## memd ui peer check"
ROOT = Path(__file__).resolve().parent.parent


def _child(rounds: int, gets: int) -> dict[str, Any]:
    import memd
    from memd.ui import peer
    from memd.ui import server as ui_server

    viewer = ui_server.Viewer({})
    checked = ui_server.Server.verify_request
    with ui_server.Running(viewer):
        cookie = f"{viewer.cookie}={viewer.token}"

        def get_all() -> float:
            t = time.perf_counter()
            for _ in range(gets):
                conn = http.client.HTTPConnection("127.0.0.1", viewer.port, timeout=10)
                conn.request("GET", "/static/ui.css", headers={"Cookie": cookie, "Host": f"127.0.0.1:{viewer.port}"})
                resp = conn.getresponse()
                resp.read()
                assert resp.status == 200, resp.status
                conn.close()
            return (time.perf_counter() - t) / gets

        with_s, without_s = [], []
        for _ in range(rounds):
            ui_server.Server.verify_request = checked  # type: ignore[method-assign]
            with_s.append(get_all())
            ui_server.Server.verify_request = lambda self, request, address: True  # type: ignore[method-assign]
            without_s.append(get_all())
        ui_server.Server.verify_request = checked  # type: ignore[method-assign]
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    client = socket.create_connection(listener.getsockname())
    conn, _ = listener.accept()
    me, there = client.getsockname(), listener.getsockname()
    n = 500
    t = time.perf_counter()
    for _ in range(n):
        peer.diag_owner(me, there)
    diag_s = (time.perf_counter() - t) / n
    t = time.perf_counter()
    for _ in range(n // 10):
        peer.owner_in(Path(peer.TCP_TABLE).read_text(), me, there)
    table_s = (time.perf_counter() - t) / (n // 10)
    sockets = len(Path(peer.TCP_TABLE).read_text().splitlines()) - 1
    for s in (client, conn, listener):
        s.close()
    return {"version": memd.__version__, "with_ms": statistics.median(with_s) * 1000,
            "without_ms": statistics.median(without_s) * 1000, "diag_us": diag_s * 1e6, "table_us": table_s * 1e6,
            "sockets": sockets}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--gets", type=int, default=200)
    ap.add_argument("--venv", type=Path, help="a regular venv to reuse (memd is reinstalled into it)")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(_child(a.rounds, a.gets)))
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_check import write_doc
    from regular import build

    with tempfile.TemporaryDirectory() as tmp:
        bindir = build(a.venv or Path(tmp) / "regular-venv")
        subprocess.run([str(bindir / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        f"{ROOT}[ui]"], check=True, stderr=subprocess.DEVNULL)  # what `pip install '.[ui]'` adds
        out = subprocess.run([str(bindir / "python"), __file__, "--child", "--rounds", str(a.rounds), "--gets",
                              str(a.gets)], cwd=tmp, capture_output=True, text=True, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    w, wo = r["with_ms"], r["without_ms"]
    print(f"a request {w:.3f} ms with the peer check, {wo:.3f} ms without ({w / wo:.2f}x); sock_diag "
          f"{r['diag_us']:.0f} us, /proc/net/tcp {r['table_us']:.0f} us ({r['sockets']} sockets)")
    load = os.getloadavg()[0]
    section = (
        f"{HEAD}\n\n"
        f"Command: `.venv/bin/python bench/bench_ui_peer.py --rounds {a.rounds} --gets {a.gets}` (a regular "
        f"install, `bench/regular.py`; 2-core shared machine, load average {load:.1f}; medians of the rounds). "
        "The real server over loopback, `/static/ui.css` with the token cookie, a connection per request.\n\n"
        "| | time | ratio to its baseline |\n|---|---|---|\n"
        f"| a request without the peer check, baseline | {wo:.3f} ms | 1.00x |\n"
        f"| a request with it (the kernel asked whose the socket is) | {w:.3f} ms | **{w / wo:.2f}x** |\n"
        f"| the lookup alone: sock_diag, one socket | {r['diag_us']:.0f} us | |\n"
        f"| the fallback alone: reading `/proc/net/tcp` ({r['sockets']} sockets) | {r['table_us']:.0f} us | |\n")
    if not a.no_write:
        write_doc(section, HEAD)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
