"""memd status: one row per project (topic files, index against its budget, findings, last session).

``memd.inspect.status_rows`` makes the rows and ``render_table`` prints them; the daemon's part of the
status (memd.daemon.info) adds its own lines to the output.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

from memd.cli import project_args

if TYPE_CHECKING:
    from memd.cli import Context
    from memd.inspect import StatusRow

HELP = "show each project's memory: topic files, index budget, hidden entries, findings, last session"


def add_arguments(p: argparse.ArgumentParser) -> None:
    project_args(p)
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")


def _ago(t: float | None, now: float) -> str:
    if t is None:
        return "-"
    d = max(0.0, now - t)
    for unit, secs in (("d", 86400), ("h", 3600), ("m", 60)):
        if d >= secs:
            return f"{int(d // secs)}{unit} ago"
    return "just now"


def render_table(rows: list[StatusRow], now: float | None = None) -> str:
    now = time.time() if now is None else now
    head = ["PROJECT", "TOPICS", "LINES", "CHARS", "LEVEL", "HIDDEN", "E/W/I", "LAST SESSION"]
    body: list[list[str]] = []
    for r in rows:
        if not r.has_memory:
            body.append([r.project, "-", "-", "-", "no memory", "-", "-", _ago(r.last_session, now)])
            continue
        f = r.findings
        body.append([r.project, str(r.topic_files), f"{r.index_lines}/{r.max_lines}",
                     f"{r.index_chars:,}/{r.max_chars:,}", r.level, str(r.hidden_entries),
                     f"{f.get('error', 0)}/{f.get('warning', 0)}/{f.get('info', 0)}",
                     _ago(r.last_session, now)])
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [head, *body]]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace, ctx: Context) -> int:
    from memd.commands._projects import preamble
    from memd.inspect import credential_line, model_credential, status_rows

    if not args.projects:
        args.all = True  # status with no PROJECT shows every project
    projects, notes = preamble(args, ctx)
    as_json = args.format == "json"
    for n in notes:
        print(n, file=sys.stderr if as_json else sys.stdout)
    rows = status_rows(projects or [], ctx.config, ctx.state_dir)
    cred = model_credential(ctx.config, ctx.claude_dir)  # which credential source model work uses (never the secret)
    if as_json:
        import json

        from memd.daemon.info import daemon_status  # the daemon's part (issue 4)

        doc = {"projects": [r.as_json() for r in rows], "daemon": daemon_status(ctx.state_dir, ctx.config),
               "model": cred}
        sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    elif rows:
        sys.stdout.write(render_table(rows))
    if not as_json:
        from memd.daemon.info import status_section  # the daemon's part (issue 4)

        sys.stdout.write(status_section(ctx.state_dir, ctx.config))
        sys.stdout.write(credential_line(cred))
        from memd.sync.evidence import status_line  # issue 15: conflicts between machines, kept for the dream

        sys.stdout.write(status_line(ctx.state_dir))
    return 0
