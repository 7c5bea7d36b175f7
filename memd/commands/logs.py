"""`memd logs [-f] [-n N] [--json]`: the daemon's log, as readable lines (or the JSON itself).

Works with a bad config (its valid keys, defaults for the rest; the problems on stderr), exiting as usual."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from memd.cli import Context

HELP = "show memd's log (the daemon's and the jobs' events); -f follows it"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines (Ctrl-C stops)")
    p.add_argument("-n", "--lines", type=int, default=40, metavar="N", help="last N lines first (default 40)")
    p.add_argument("--json", action="store_true", help="print the JSON lines as they are")


def tail_lines(path: Path, n: int, block: int = 1 << 16) -> tuple[list[str], int]:
    """The last n lines of a file and the offset just past them, reading backwards in blocks."""
    import os

    with open(path, "rb") as f:
        end = f.seek(0, os.SEEK_END)
        pos, data = end, b""
        while pos > 0 and data.count(b"\n") <= n:
            step = min(block, pos)
            pos -= step
            f.seek(pos)
            data = f.read(step) + data
    lines = data.decode("utf-8", "replace").splitlines()
    return (lines[-n:] if n > 0 else []), end


def run(args: argparse.Namespace, ctx: Context) -> int:
    import os
    import sys
    import time

    from memd.commands._projects import config_warning, tolerant_config
    from memd.errors import MemdError
    from memd.logs import log_path, render_line

    bad_config = tolerant_config(ctx)  # the log is where a user debugs a bad config: never locked out
    if bad_config is not None:
        print(config_warning("logs", bad_config), file=sys.stderr)
    path = log_path(ctx.state_dir)
    show = (lambda s: s) if args.json else render_line
    if not path.exists() and not args.follow:
        raise MemdError(f"no log yet at {path} (start the daemon: `memd run`)")
    offset = 0
    inode = None
    if path.exists():
        want = max(args.lines, 0)
        lines, offset = tail_lines(path, want)
        inode = os.stat(path).st_ino
        older = path.with_name(path.name + ".1")  # just rotated: the last lines are in the previous file
        if len(lines) < want and older.exists():
            lines = tail_lines(older, want - len(lines))[0] + lines
        for line in lines:
            print(show(line))
    if not args.follow:
        return 0
    sys.stdout.flush()
    buf = b""
    try:
        while True:
            try:
                st = os.stat(path)
            except FileNotFoundError:
                time.sleep(0.5)
                continue
            if st.st_ino != inode or st.st_size < offset:  # rotated or truncated: start the new file
                inode, offset, buf = st.st_ino, 0, b""
            if st.st_size > offset:
                with open(path, "rb") as f:
                    f.seek(offset)
                    chunk = f.read(st.st_size - offset)
                offset += len(chunk)
                buf += chunk
                *complete, buf = buf.split(b"\n")
                for raw in complete:
                    print(show(raw.decode("utf-8", "replace")))
                sys.stdout.flush()
            time.sleep(0.5)
    except KeyboardInterrupt:
        return 0
