"""memd render: print a session as the model would see it, so a user can check what memd sends:
the same pieces (a span whose user turns exceed the budget is sent in several runs) and the same
redactions (``[REDACTED:<kind>]``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memd.cli import Context

HELP = "print a session transcript as memd renders it for the model"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", metavar="SESSION", help="a transcript .jsonl, or a session UUID under projects/")
    p.add_argument("--from", dest="offset", type=int, default=0, metavar="OFFSET",
                   help="byte offset to start at (default 0: the whole session)")
    p.add_argument("--include-subagents", action="store_true",
                   help="also render subagent (sidechain) records of the main transcript")


def run(args: argparse.Namespace, ctx: Context) -> int:
    from memd.errors import UsageError
    from memd.transcripts.render import Budgets, render_pieces
    from memd.transcripts.scan import find_session, read_span

    if args.offset < 0:
        raise UsageError("--from: the offset must be 0 or more")
    path = find_session(ctx.claude_dir, args.session)
    if path is None:
        where = Path(args.session) if args.session.endswith(".jsonl") else ctx.claude_dir / "projects"
        raise UsageError(f"no such session: {args.session!r} (looked in {where})")
    from memd.transcripts.reader import next_line_start

    size = path.stat().st_size
    if args.offset > size:
        raise UsageError(f"--from {args.offset} is past the end of {path} ({size} bytes)")
    start = next_line_start(path, args.offset)  # a user's offset may fall inside a line
    from memd import layout
    from memd.transcripts.sessions import is_subagent

    # the memory folder of the session's own project: the turns up to its own memory write are not sent
    proj = None if is_subagent(path) else layout.project_for_folder(ctx.claude_dir, path.parent)
    span = read_span(path, start, ctx.config, include_sidechain=args.include_subagents,
                     memory_dir=proj.memory_dir if proj else None, project_name=proj.name if proj else None)
    sent = span.after_own_write()
    pieces = render_pieces(sent.records, Budgets.from_config(ctx.config))
    for n, pc in enumerate(pieces, 1):
        if len(pieces) > 1:
            sys.stdout.write(f"{'' if n == 1 else chr(10)}=== run {n} of {len(pieces)} ===\n")
        sys.stdout.write(pc.text)
    notes = [f"{path}: bytes {span.start_offset}-{span.end_offset} of {span.size}"]
    if len(sent.records) < len(span.records):
        notes.append(f"{len(span.records) - len(sent.records)} record(s) up to the session's own memory write "
                     "not shown (the catch-up does not send them)")
    redacted = sum(pc.redacted for pc in pieces)
    if redacted:
        notes.append(f"{redacted} secret(s) redacted")
    if any(pc.level for pc in pieces):
        notes.append("over the render budget: tool results, thinking or narration cut (user words whole)")
    if span.bad_lines:
        notes.append(f"{span.bad_lines} bad line(s) skipped")
    if span.pending_bytes:
        notes.append(f"{span.pending_bytes} byte(s) after the last newline not read yet")
    print("# " + "; ".join(notes), file=sys.stderr)
    return 0
