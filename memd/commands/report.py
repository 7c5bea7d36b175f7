"""`memd report`: print the latest morning check-in (or write one now with --now)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memd.cli import Context

HELP = ("print the latest check-in report (the night's runs, manual rebuilds and undos, changes, the memories "
        "forgotten and why, open warnings, tokens and cost); says so when there is nothing to report")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--now", action="store_true",
                   help="build a report of the runs since the last check-in now (printed, not saved)")
    p.add_argument("--path", action="store_true", help="print the report's file name only")


def run(args: argparse.Namespace, ctx: Context) -> int:
    import time

    from memd.errors import MemdError
    from memd.jobs import checkin

    state_dir = ctx.state_dir
    if args.now:
        from memd.state import StateStore

        with StateStore.open(state_dir) as state:
            now = time.time()
            since = checkin.since_last(state, now)
            report = checkin.build_report(state, now=now, since=since, state_dir=state_dir)
        s = report.summary
        if not (s["runs"] or s["open_warnings"] or s["idle_projects"]):
            print(f"nothing to report since {time.strftime('%Y-%m-%d %H:%M', time.localtime(since))}: no runs "
                  "(jobs, rebuilds, undos), no open warnings")
            return 0
        print(report.markdown, end="")
        return 0
    path = checkin.latest_report(state_dir)
    if path is None:
        if args.path:
            raise MemdError(f"no check-in report yet in {checkin.reports_dir(state_dir)}")
        print(f"nothing to report yet: no check-in report in {checkin.reports_dir(state_dir)} (the daemon "
              "writes one each morning; `memd report --now` shows the runs since the last one)")
        return 0
    if args.path:
        print(path)
        return 0
    print(path.read_text(encoding="utf-8"), end="")
    return 0
