"""memd status: one row per project (topic files, index against its budget, findings, last session),
the warnings measured now, the daemon, and the credential model work uses.

``memd.inspect.status_rows`` makes the rows (measuring each index as the SessionStart hook does) and
``render_table`` prints them; the daemon's part (memd.daemon.info) adds its own lines. Projects without a
memory folder are summed up in one line unless named or ``--all``. A bad config does not lock the user
out: status goes on with the config's valid keys, says what is wrong, and exits 2.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from memd.cli import project_args

if TYPE_CHECKING:
    from pathlib import Path

    from memd.cli import Context
    from memd.inspect import StatusRow

HELP = ("show each project's memory (index budget, hidden entries, findings, last session), the warnings "
        "measured now, the daemon and model work; --all lists projects without a memory folder too")


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
        body.append([r.project, str(r.topic_files), f"{r.index_lines:,}/{r.max_lines}",
                     f"{r.index_chars:,}/{r.max_chars:,}", r.level.upper() if r.level == "error" else r.level,
                     f"{r.hidden_entries:,}", f"{f.get('error', 0)}/{f.get('warning', 0)}/{f.get('info', 0)}",
                     _ago(r.last_session, now)])
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [head, *body]]
    return "\n".join(lines) + "\n"


def _recorded(daemon: dict[str, Any] | None, names: set[str]) -> list[dict[str, Any]]:
    """The daemon's open warnings about these projects that status does not measure itself."""
    from memd.inspect import MEASURED_KINDS

    return [w for w in (daemon or {}).get("warnings", [])
            if w["project"] in names and w["kind"] not in MEASURED_KINDS]


def run(args: argparse.Namespace, ctx: Context) -> int:
    from memd.commands._projects import config_warning, preamble, tolerant_config
    from memd.daemon import info
    from memd.inspect import conflict_blocks_line, credential_line, measured_warnings, model_credential, status_rows

    bad_config = tolerant_config(ctx)
    if bad_config is not None:
        print(config_warning("status", bad_config), file=sys.stderr)
    every = bool(args.all)
    if not args.projects:
        args.all = True  # status with no PROJECT looks at every project
    projects, notes = preamble(args, ctx)
    as_json = args.format == "json"
    for n in notes:
        print(n, file=sys.stderr if as_json else sys.stdout)
    rows = status_rows(projects or [], ctx.config, ctx.state_dir)
    warnings = measured_warnings(rows, ctx.config)
    cred = model_credential(ctx.config, ctx.claude_dir)  # which credential source model work uses (never the secret)
    text, daemon = info.status_section(ctx.state_dir, ctx.config)
    recorded = _recorded(daemon, {r.project for r in rows})
    if as_json:
        import json

        doc = {"projects": [r.as_json() for r in rows],
               "warnings": [*warnings, *({"recorded": True, **w} for w in recorded)],
               "daemon": daemon, "model": cred, "sync": _sync_json(ctx.state_dir, {r.project for r in rows}),
               "config": None if bad_config is None else {"path": bad_config.path, "problems": bad_config.problems}}
        sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        return _exit_code(bad_config is not None, rows)
    shown = rows if (every or args.projects) else [r for r in rows if r.has_memory]
    if shown:
        sys.stdout.write(render_table(shown))
    if len(shown) < len(rows):
        left = len(rows) - len(shown)
        print(f"+ {left} project{'s' if left != 1 else ''} with no memory folder (`memd status --all` lists "
              f"{'them' if left != 1 else 'it'})")
    sys.stdout.write(text)
    if warnings or recorded:
        print(f"open warnings ({len(warnings) + len(recorded)}, measured now"
              + (" and recorded by the daemon" if recorded else "") + "):")
        for w in warnings:
            print(f"  {w['text']}")
        for line in info.warning_lines(recorded):
            print(line)
    else:
        print("open warnings: none")
    sys.stdout.write(credential_line(cred))
    from memd.sync.evidence import status_line  # issue 15: conflicts between machines, kept for the dream
    from memd.sync.gitremote import ignored_lines, offline_line  # issue 33: an unreachable remote, files left alone
    from memd.sync.held import status_lines  # issue 21: what sync holds, why, and the command that resolves it

    sys.stdout.write(offline_line(ctx.state_dir))
    sys.stdout.write(ignored_lines(ctx.state_dir))
    sys.stdout.write(status_line(ctx.state_dir))
    sys.stdout.write(conflict_blocks_line(rows))
    sys.stdout.write(status_lines(ctx.state_dir))
    from memd.sync.forget import status_lines as forgotten_lines  # issue 22: files holding what was forgotten

    sys.stdout.write(forgotten_lines(ctx.state_dir))
    return _exit_code(bad_config is not None, rows)


def _sync_json(state_dir: Path, names: set[str]) -> dict[str, Any]:
    """What the text's sync lines say, as values: per project, what sync holds (files with their reason,
    the whole project, files an undo keeps here), conflicts kept for the dream, files held for holding
    what `memd forget` took out; and the lines themselves."""
    from memd.sync import evidence, forget, held

    out: dict[str, Any] = {"held": {}, "conflicts": {}, "forgotten": {}}
    for name, h in held.load_all(state_dir).items():
        if name in names and not h.empty:
            out["held"][name] = {"files": {rel: row.get("reason", "refused") for rel, row in sorted(h.files.items())},
                                 "project": dict(h.project) or None, "undone": sorted(h.undone)}
    for name in sorted(names):
        n = len(evidence.open_conflicts(state_dir, name))
        if n:
            out["conflicts"][name] = n
    for name, files in forget.held_files(state_dir).items():
        if name in names:
            out["forgotten"][name] = files
    text = (evidence.status_line(state_dir, sorted(names)) + held.status_lines(state_dir, sorted(names))
            + forget.status_lines(state_dir))
    out["lines"] = text.splitlines()
    return out


def _exit_code(bad_config: bool, rows: list[Any]) -> int:
    """2: the config file is bad (status ran on its valid keys); 1: a project could not be measured (an
    ERROR row: the report is not whole); 0: every project was measured, whatever its level — an index
    over its budget is shown and warned about, and is the daemon's work to fix, not a failure of status."""
    if bad_config:
        return 2
    return 1 if any(r.level == "error" for r in rows) else 0
