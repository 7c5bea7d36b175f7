"""memd recall: run the recall selection for a query and print what would be injected."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memd.cli import Context

HELP = "pick the memories relevant to QUERY with the model and print what recall would inject"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("query", metavar="QUERY", help="the prompt to recall memories for")
    p.add_argument("--project", metavar="PROJECT",
                   help="working folder, folder under projects/, or memory folder (default: the current folder)")
    p.add_argument("--session", metavar="ID",
                   help="behave as within this session: skip memories it already got, count its bytes, "
                        "and remember what is shown now")
    p.add_argument("--manifest", action="store_true", help="print the manifest the model would see, call nothing")
    p.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="deadline of the model call (default: hooks.recall_timeout_s)")


def run(args: argparse.Namespace, ctx: Context) -> int:
    from memd import recall
    from memd.commands._projects import select
    from memd.errors import MemdError, UsageError
    from memd.llm import client as llm

    cfg = ctx.config
    project = select(args, ctx)[0]
    if not project.memory_dir.is_dir():
        raise MemdError(f"no memory folder for this project (looked for {project.memory_dir})")
    if args.manifest:
        from memd.memfolder.manifest import build

        entries = build(project.memory_dir, max_files=cfg.budget.max_topic_files,
                        max_lines=cfg.budget.max_frontmatter_lines, max_bytes=cfg.budget.max_file_bytes).entries
        print(recall.render_manifest(entries))
        print(f"# {len(entries)} file(s) from {project.memory_dir}", file=sys.stderr)
        return 0
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError("--timeout must be more than 0")
    reason = llm.model_off_reason(cfg)
    if reason is not None:
        raise MemdError(f"recall needs the model: {reason}")
    result = recall.recall(args.query, project.memory_dir, cfg,
                           state_dir=ctx.state_dir if args.session else None, session_id=args.session,
                           timeout_s=args.timeout)
    if result.text:
        print(result.text)
    notes = []
    if result.chosen:
        notes.append(f"chosen: {', '.join(result.chosen)}")
    if result.dropped:
        notes.append(f"dropped (not in the manifest): {', '.join(result.dropped)}")
    if result.left:
        notes.append(f"left for a later prompt (caps): {', '.join(result.left)}")
    if result.note:
        notes.append(result.note)
    if notes:
        print("# " + "; ".join(notes), file=sys.stderr)
    return 1 if result.failed else 0
