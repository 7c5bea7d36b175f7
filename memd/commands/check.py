"""memd check: lint memory folders (budget, links, duplicates, frontmatter, dates, secrets).

Exit status: 0 when no finding is an error, 1 when one is, 2 on usage or config errors.
With --all, projects without a memory folder are skipped (and counted in the summary); a project
named explicitly that has none is reported as "no memory folder". Codes: docs/check.md.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memd.cli import project_args, select_projects

if TYPE_CHECKING:
    from pathlib import Path

    from memd.cli import Context
    from memd.config import BudgetConfig
    from memd.core.files import FolderSnapshot
    from memd.core.findings import Finding
    from memd.layout import Project

HELP = "lint memory folders: budget, links, duplicates, frontmatter, relative dates, secrets"


def add_arguments(p: argparse.ArgumentParser) -> None:
    project_args(p)
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    p.add_argument("--no-cache", action="store_true",
                   help="check every folder afresh (by default unchanged folders reuse their last result)")


@dataclass
class ProjectCheck:
    project: Project
    exists: bool
    lines: int = 0
    chars: int = 0
    max_lines: int = 0
    max_chars: int = 0
    hidden_entries: int = 0
    level: str = "ok"
    topic_files: int = 0
    findings: list[Finding] = field(default_factory=list)

    def cache_data(self) -> dict[str, Any]:
        return {"exists": self.exists, "lines": self.lines, "chars": self.chars, "hidden_entries": self.hidden_entries,
                "level": self.level, "topic_files": self.topic_files,
                "findings": [f.to_json() for f in self.findings]}

    @classmethod
    def from_cache(cls, project: Project, budget: BudgetConfig, data: dict[str, Any]) -> ProjectCheck:
        from memd.core.findings import Finding

        return cls(project, bool(data["exists"]), int(data["lines"]), int(data["chars"]), budget.max_lines,
                   budget.max_chars, int(data["hidden_entries"]), str(data["level"]), int(data["topic_files"]),
                   [Finding(**f) for f in data["findings"]])

    def as_json(self) -> dict[str, Any]:
        return {
            "project": self.project.name,
            "memory_dir": str(self.project.memory_dir),
            "budget": {"lines": self.lines, "chars": self.chars, "max_lines": self.max_lines,
                       "max_chars": self.max_chars, "hidden_entries": self.hidden_entries},
            "findings": [f.to_json() for f in self.findings],
        }


def check_snapshot(project: Project, snap: FolderSnapshot, budget: BudgetConfig,
                   *, team_pii: bool = True) -> ProjectCheck:
    """Lint one read folder and measure its index (also used by `memd status`)."""
    from memd.core import lint

    res = ProjectCheck(project, snap.exists, max_lines=budget.max_lines, max_chars=budget.max_chars)
    if not snap.exists:
        return res
    report = lint.check(snap, budget, team_pii=team_pii)
    res.findings = report.findings
    res.topic_files = sum(1 for _ in snap.topics())
    if report.budget is not None:
        b = report.budget
        res.lines, res.chars, res.hidden_entries, res.level = b.lines, b.chars, len(b.hidden), b.level
    return res


def check_project(project: Project, budget: BudgetConfig, *, team_pii: bool = True,
                  cache_dir: Path | None = None) -> ProjectCheck:
    """Check one project; with cache_dir (memd's state folder), an unchanged folder reuses its result."""
    from memd.memfolder.folder import read_folder

    key = None
    if cache_dir is not None:
        from memd import checkcache

        key, hit = checkcache.lookup(cache_dir, project.memory_dir, budget, team_pii)
        if hit is not None:
            try:
                return ProjectCheck.from_cache(project, budget, hit)
            except (KeyError, TypeError, ValueError):
                pass
    snap = read_folder(project.memory_dir, budget, signatures=False)  # check never writes
    res = check_snapshot(project, snap, budget, team_pii=team_pii)
    if cache_dir is not None:
        from memd import checkcache

        newest = max((f.mtime for f in snap.files if f.mtime is not None), default=None)
        checkcache.store(cache_dir, project.memory_dir, key, res.cache_data(), newest)
    return res


def preamble(args: argparse.Namespace, ctx: Context) -> tuple[list[Project] | None, list[str]]:
    """The projects to act on and notes for the user; None when there is nothing to look at."""
    from memd import layout

    claude = ctx.claude_dir
    notes: list[str] = []
    wants_all = bool(getattr(args, "all", False))
    if wants_all and not layout.projects_root(claude).is_dir():
        return None, [f"no Claude Code folder at {claude} (no projects yet): nothing to check"]
    why = layout.memory_disabled(claude)
    if why:
        notes.append(f"note: Claude Code's auto memory is off ({why}); existing memory folders are "
                     "checked anyway")
    projects = select_projects(args, ctx)
    if wants_all and not projects:
        notes.append(f"no projects under {layout.projects_root(claude)}: nothing to check")
    return projects, notes


def run(args: argparse.Namespace, ctx: Context) -> int:
    projects, notes = preamble(args, ctx)
    as_json = args.format == "json"
    note_stream = sys.stderr if as_json else sys.stdout
    for n in notes:
        print(n, file=note_stream)
    if projects is None:
        if as_json:
            print("[]")
        return 0
    budget = ctx.config.budget
    team_pii = ctx.config.hooks.team_pii
    cache = None if args.no_cache else ctx.state_dir
    results = [check_project(p, budget, team_pii=team_pii, cache_dir=cache) for p in projects]
    skipped = 0
    if args.all:
        skipped = sum(1 for r in results if not r.exists)
        results = [r for r in results if r.exists]
    if as_json:
        import json

        sys.stdout.write(json.dumps([r.as_json() for r in results], indent=2, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(format_text(results, skipped))
    return 1 if any(f.severity == "error" for r in results for f in r.findings) else 0


def format_text(results: list[ProjectCheck], skipped: int = 0) -> str:
    from memd.core.findings import counts

    out: list[str] = []
    for r in results:
        if not r.exists:
            out.append(f"{r.project.name}: no memory folder ({r.project.memory_dir}): nothing to check")
            continue
        base = str(r.project.memory_dir)
        for f in r.findings:
            where = base if f.path == "." else f"{base}/{f.path}"
            out.append(f"{where}:{f.line}: {f.code} {f.severity}: {f.message}")
    c = counts(f for r in results for f in r.findings)
    checked = sum(1 for r in results if r.exists)
    summary = f"{checked} memory folder{'s' if checked != 1 else ''} checked"
    if skipped:
        summary += f" ({skipped} project{'s' if skipped != 1 else ''} without memory skipped)"
    if not any(c.values()):
        summary += ": no findings"
    else:
        summary += f": {c['error']} error(s), {c['warning']} warning(s), {c['info']} info"
    out.append(summary)
    return "\n".join(out) + "\n"
