"""memd scan: read every session's new lines and remember where the scan got to."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING

from memd.cli import project_args

if TYPE_CHECKING:
    from memd.cli import Context
    from memd.transcripts.scan import ProjectScan

HELP = "read new transcript lines and advance the scan offsets (never the catch-up's)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    project_args(p)
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    p.add_argument("--dry-run", action="store_true", help="read and report, save nothing")


def run(args: argparse.Namespace, ctx: Context) -> int:
    # Like `memd check`: no PROJECT means the current folder's project; --all means every one.
    from memd import layout
    from memd.commands._projects import require_claude_dir, select
    from memd.errors import MemdError
    from memd.state import StateStore
    from memd.transcripts.scan import scan_project

    require_claude_dir(args, ctx)
    root = layout.projects_root(ctx.claude_dir)
    if args.all and not root.is_dir():
        print(f"no Claude Code folder at {ctx.claude_dir} (no projects yet): nothing to scan",
              file=sys.stderr if args.format == "json" else sys.stdout)
        if args.format == "json":
            print("[]")
        return 0
    projects = select(args, ctx)
    now = time.time()
    results: list[ProjectScan] = []
    store = StateStore.open(ctx.state_dir)
    try:
        from memd.commands._progress import progress  # a bar on a terminal only

        failed: list[tuple[str, str]] = []  # (project, reason)
        with progress(len(projects), "scanning") as step:
            for project in projects:
                step(project.name)
                try:
                    results.append(scan_project(project, store, ctx.config, now=now, dry_run=args.dry_run))
                except MemdError:
                    raise  # the state file busy or unwritable: nothing can be scanned
                except Exception as e:  # one project's failure is that project's, with the reason
                    failed.append((project.name, f"{type(e).__name__}: {e}"))
    finally:
        store.close()
    if args.format == "json":
        out = [r.as_json() for r in results] + [{"project": n, "error": why} for n, why in failed]
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(format_text(results, dry_run=args.dry_run))
        for name, why in failed:
            sys.stdout.write(f"{name}: failed: {why}\n")
    return 1 if failed else 0


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"  # pragma: no cover


def format_text(results: list[ProjectScan], *, dry_run: bool = False) -> str:
    out: list[str] = []
    for r in results:
        main = [s for s in r.sessions if s.main]
        subs = len(r.sessions) - len(main)
        head = f"{r.project.name}: {len(main)} session(s)" + (f" + {subs} subagent transcript(s)" if subs else "")
        out.append(head)
        out.append(f"  memory:    {r.project.memory_dir}")
        out.append(f"  new:       {_size(r.new_bytes)}, {r.records} record(s)"
                   + (f", {r.bad_lines} bad line(s)" if r.bad_lines else ""))
        fed = sorted({s.feeds for s in r.sessions if s.feeds != r.project.name})
        if fed:
            out.append(f"  feeds:     {', '.join(fed)} (sessions in a subfolder or worktree)")
        for s in r.sessions:
            if s.records or s.bad_lines or s.replaced:
                notes = []
                if s.bad_lines:
                    notes.append(f"{s.bad_lines} bad")
                if s.replaced:
                    notes.append("replaced: read again")
                if s.memory_write_at is not None:
                    notes.append("wrote memory")
                extra = f" ({', '.join(notes)})" if notes else ""
                out.append(f"    {s.path.name}: +{_size(s.new_bytes)}, {s.records} record(s){extra}")
        act = sorted({s.session_id for s in r.active})
        if act:
            out.append(f"  active:    {', '.join(act)}")
        if r.forgotten:
            out.append(f"  gone:      {len(r.forgotten)} transcript(s) no longer on disk")
    if dry_run:
        out.append("(dry run: nothing saved)")
    return "\n".join(out) + ("\n" if out else "")
