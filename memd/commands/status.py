"""memd status: one row per project (topic files, index against its budget, findings, last session).

``build_rows`` makes the rows and ``render_table`` prints them; the daemon's part of the status
(issue 4) adds its own fields to ``StatusRow.extra`` and its own lines to the output.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memd.cli import project_args

if TYPE_CHECKING:
    from pathlib import Path

    from memd.cli import Context
    from memd.config import Config
    from memd.layout import Project

HELP = "show each project's memory: topic files, index budget, hidden entries, findings, last session"


def add_arguments(p: argparse.ArgumentParser) -> None:
    project_args(p)
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")


@dataclass
class StatusRow:
    project: str
    memory_dir: str
    has_memory: bool
    topic_files: int
    index_lines: int
    max_lines: int
    index_chars: int
    max_chars: int
    level: str  # ok | near | over | none
    hidden_entries: int
    findings: dict[str, int]  # error / warning / info -> count
    last_session: float | None  # mtime of the newest main-session transcript
    extra: dict[str, Any] = field(default_factory=dict)  # other parts of memd add columns here

    def as_json(self) -> dict[str, Any]:
        return {
            "project": self.project, "memory_dir": self.memory_dir, "has_memory": self.has_memory,
            "topic_files": self.topic_files,
            "index": {"lines": self.index_lines, "max_lines": self.max_lines, "chars": self.index_chars,
                      "max_chars": self.max_chars, "level": self.level, "hidden_entries": self.hidden_entries},
            "findings": dict(self.findings),
            "last_session": _iso(self.last_session),
            **self.extra,
        }


def _iso(t: float | None) -> str | None:
    if t is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def last_session(project: Project) -> float | None:
    from memd import layout

    newest: float | None = None
    for p in layout.session_files(project.dir):
        if not layout.is_uuid_session(p):
            continue
        try:
            m = p.stat().st_mtime
        except OSError:
            continue
        newest = m if newest is None or m > newest else newest
    return newest


def build_row(project: Project, config: Config, cache_dir: Path | None = None) -> StatusRow:
    from memd.commands.check import check_project
    from memd.core.findings import counts

    b = config.budget
    res = check_project(project, b, team_pii=config.hooks.team_pii, cache_dir=cache_dir)
    return StatusRow(
        project.name, str(project.memory_dir), res.exists, res.topic_files, res.lines, b.max_lines,
        res.chars, b.max_chars, res.level if res.exists else "none", res.hidden_entries,
        counts(res.findings), last_session(project))


def build_rows(projects: list[Project], config: Config, cache_dir: Path | None = None) -> list[StatusRow]:
    """One row per project; cache_dir (memd's state folder) lets unchanged folders skip the re-check."""
    return [build_row(p, config, cache_dir) for p in projects]


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
    from memd.commands.check import preamble

    if not args.projects:
        args.all = True  # status with no PROJECT shows every project
    projects, notes = preamble(args, ctx)
    as_json = args.format == "json"
    for n in notes:
        print(n, file=sys.stderr if as_json else sys.stdout)
    rows = build_rows(projects or [], ctx.config, ctx.state_dir)
    if as_json:
        import json

        from memd.daemon.info import daemon_status  # the daemon's part (issue 4)

        doc = {"projects": [r.as_json() for r in rows], "daemon": daemon_status(ctx.state_dir, ctx.config)}
        sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    elif rows:
        sys.stdout.write(render_table(rows))
    if not as_json:
        from memd.daemon.info import status_section  # the daemon's part (issue 4)

        sys.stdout.write(status_section(ctx.state_dir, ctx.config))
    return 0
