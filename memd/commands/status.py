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
    began = time.process_time()  # CPU time: what status costs, whatever else the machine runs
    rows = status_rows(projects or [], ctx.config, ctx.state_dir)
    spent = None if args.projects else time.process_time() - began  # named projects: always computed
    warnings = measured_warnings(rows, ctx.config)
    # which credential source (or claude CLI) model work uses, never the secret
    cred = model_credential(ctx.config, ctx.claude_dir, ctx.state_dir)
    text, daemon = info.status_section(ctx.state_dir, ctx.config)
    recorded = _recorded(daemon, {r.project for r in rows})
    from memd.sync.held import budget_lines  # issue 33: a synced index over its budget, and how to resolve it

    over = budget_lines(ctx.state_dir, {p.name: p.memory_dir for p in projects or []}, ctx.config)
    if as_json:
        import json

        evidence = _evidence(ctx, rows, spent)
        late = evidence.pop(_NOT_YET, {}).get("projects", 0)
        doc = {"projects": [{**r.as_json(), **({"evidence": evidence[r.project]} if r.project in evidence else {})}
                            for r in rows],
               "warnings": [*warnings, *({"recorded": True, **w} for w in recorded)],
               "daemon": daemon, "model": cred, "sync": _sync_json(ctx.state_dir, {r.project for r in rows}, over),
               "evidence_not_computed": late,
               "config": None if bad_config is None else {"path": bad_config.path, "problems": bad_config.problems},
               "catchup_retries": _retries_json(ctx.state_dir, [r.project for r in rows], ctx.config)}
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
    sys.stdout.write(_evidence_lines(ctx, shown, spent))
    from memd.sync.evidence import status_line  # issue 15: conflicts between machines, kept for the dream
    from memd.sync.gitremote import ignored_lines, offline_line  # issue 33: an unreachable remote, files left alone
    from memd.sync.held import status_lines  # issue 21: what sync holds, why, and the command that resolves it

    sys.stdout.write(offline_line(ctx.state_dir))
    sys.stdout.write(ignored_lines(ctx.state_dir))
    sys.stdout.write(status_line(ctx.state_dir))
    sys.stdout.write(conflict_blocks_line(rows))
    sys.stdout.write(status_lines(ctx.state_dir))
    sys.stdout.write(over)
    from memd.sync.forget import status_lines as forgotten_lines  # issue 22: files holding what was forgotten

    sys.stdout.write(forgotten_lines(ctx.state_dir))
    from memd.jobs.spantries import status_lines as retry_lines  # issue 34: spans waiting to be retried

    sys.stdout.write(retry_lines(ctx.state_dir, [r.project for r in rows], ctx.config))
    from memd.forget import pending_lines  # issue 34: a forget a kill interrupted (the history may hold the text)

    sys.stdout.write(pending_lines(ctx.state_dir))
    return _exit_code(bad_config is not None, rows)


EVIDENCE_SHARE = 0.2  # of the time status spent measuring, what computing evidence anew may add
EVIDENCE_MIN_S = 0.25


def _evidence(ctx: Context, rows: list[Any], spent: float | None = None) -> dict[str, dict[str, Any]]:
    """Per project with memory: the evidence waiting for the dream (``memd.jobs.evidence.summary``). One
    project that cannot be read is left out; the state unreadable or busy: none (status still reports).
    A summary is kept in the state and read back while the folder is unchanged; computing them anew (a
    first run over many projects reads every topic file) may add at most ``EVIDENCE_SHARE`` of the CPU
    time status spent measuring (``spent``; at least ``EVIDENCE_MIN_S``): the projects past that are named
    as not computed yet (``_NOT_YET``), and a later status (reading back what this one kept, cheaply,
    then computing further) or the project's own computes them."""
    import time
    from pathlib import Path

    from memd.jobs.evidence import summary
    from memd.state import StateStore

    out: dict[str, dict[str, Any]] = {}
    try:
        state = StateStore.open(ctx.state_dir, timeout=2.0)
    except Exception:  # status reports what it can
        return out
    try:
        now = time.time()
        budget = None if spent is None else max(EVIDENCE_MIN_S, EVIDENCE_SHARE * spent)
        start = time.process_time()
        late = 0
        with state.batch():  # the summaries kept in one transaction, not one commit per project
            for r in rows:
                if not r.has_memory:
                    continue
                if budget is not None and time.process_time() - start > budget:
                    late += 1  # past the budget nothing more is read, not even what is kept
                    continue
                try:
                    out[r.project] = summary(Path(r.memory_dir), ctx.config, state, r.project, now)
                except Exception:  # one project's failure never fails the command
                    continue
        if late:
            out[_NOT_YET] = {"projects": late}
    finally:
        state.close()
    return out


_NOT_YET = ""  # the key of the projects whose evidence this run did not compute


def _evidence_lines(ctx: Context, rows: list[Any], spent: float | None = None) -> str:
    from memd.jobs.evidence import summary_line

    got = _evidence(ctx, rows, spent)
    late = got.pop(_NOT_YET, {}).get("projects", 0)
    lines = [ln for ln in (summary_line(name, s) for name, s in got.items()) if ln]
    tail = (f"  not computed yet for {late} project(s) (status keeps what it computed; run it again, or "
            f"`memd status PROJECT`)\n" if late else "")
    if not lines:
        return ("evidence: nothing waiting for the dream" + (" in the projects computed" if late else "")
                + "\n" + tail)
    return "evidence (computed locally, for the next dream; never acted on without it):\n" + "".join(lines) + tail


def _sync_json(state_dir: Path, names: set[str], budget: str = "") -> dict[str, Any]:
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
    from memd.forget import pending, pending_lines

    out["forget_unfinished"] = {name: len(rows) for name, rows in pending(state_dir).items() if name in names}
    text = (evidence.status_line(state_dir, sorted(names)) + held.status_lines(state_dir, sorted(names))
            + budget + forget.status_lines(state_dir) + pending_lines(state_dir, sorted(names)))
    out["lines"] = text.splitlines()
    return out


def _retries_json(state_dir: Path, names: list[str], config: Any) -> dict[str, Any]:
    """The spans waiting to be retried, per project (``memd.jobs.spantries``), and the text's lines."""
    from memd.jobs.spantries import status_lines, waiting
    from memd.state import FILENAME, StateStore

    out: dict[str, Any] = {"projects": {}, "lines": status_lines(state_dir, names, config).splitlines()}
    if (state_dir / FILENAME).exists():
        with StateStore.open(state_dir) as st:
            for name, rows in waiting(st, names, config, time.time()).items():
                out["projects"][name] = [{"tries": tr.tries, "last_try": tr.last_try, "state": s}
                                         for tr, s in rows]
    return out


def _exit_code(bad_config: bool, rows: list[Any]) -> int:
    """2: the config file is bad (status ran on its valid keys); 1: a project could not be measured (an
    ERROR row: the report is not whole); 0: every project was measured, whatever its level — an index
    over its budget is shown and warned about, and is the daemon's work to fix, not a failure of status."""
    if bad_config:
        return 2
    return 1 if any(r.level == "error" for r in rows) else 0
