"""What `memd check` and `memd status` report about a project's memory, below the door.

``check_project`` lints one memory folder and measures its index (``ProjectCheck``; unchanged folders
answer from memd.checkcache); ``check_projects`` does it for a selection; ``status_rows`` turns checks into
the rows `memd status` shows (``StatusRow``, with the newest session's time). The commands parse their
arguments, call one of these and print. Reads through memd.memfolder; decides nothing the core does not.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from memd.config import BudgetConfig, Config
    from memd.core.files import FolderSnapshot
    from memd.core.findings import Finding
    from memd.layout import Project


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
    import time

    report = lint.check(snap, budget, team_pii=team_pii, today=time.strftime("%Y-%m-%d"))
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


@dataclass(frozen=True)
class CheckReport:
    results: list[ProjectCheck]
    skipped: int  # projects without a memory folder left out of ``results``

    @property
    def has_errors(self) -> bool:
        return any(f.severity == "error" for r in self.results for f in r.findings)


def check_projects(projects: list[Project], config: Config, *, cache_dir: Path | None = None,
                   skip_missing: bool = False) -> CheckReport:
    """Check each project (``skip_missing``: leave out, and count, those without a memory folder)."""
    def each() -> list[ProjectCheck]:
        return [check_project(p, config.budget, team_pii=config.hooks.team_pii, cache_dir=cache_dir)
                for p in projects]

    if cache_dir is None:
        results = each()
    else:
        from memd import checkcache

        with checkcache.batch(cache_dir):  # one write of the cache file, not one per project
            results = each()
    if not skip_missing:
        return CheckReport(results, 0)
    kept = [r for r in results if r.exists]
    return CheckReport(kept, len(results) - len(kept))


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


def status_row(project: Project, config: Config, cache_dir: Path | None = None) -> StatusRow:
    from memd.core.findings import counts

    b = config.budget
    res = check_project(project, b, team_pii=config.hooks.team_pii, cache_dir=cache_dir)
    return StatusRow(
        project.name, str(project.memory_dir), res.exists, res.topic_files, res.lines, b.max_lines,
        res.chars, b.max_chars, res.level if res.exists else "none", res.hidden_entries,
        counts(res.findings), last_session(project))


def status_rows(projects: list[Project], config: Config, cache_dir: Path | None = None) -> list[StatusRow]:
    """One row per project; cache_dir (memd's state folder) lets unchanged folders skip the re-check."""
    return [status_row(p, config, cache_dir) for p in projects]


def model_credential(config: Config, claude: Path | None = None) -> dict[str, Any]:
    """Which credential source model work uses and whether it is on (never the secret): the
    ``model`` part of ``memd status``. ``claude``: the Claude folder whose settings count (default:
    the config's)."""
    from memd import layout
    from memd.llm.client import credential_source

    return credential_source(config, None, None if claude is None else layout.read_settings(claude)).as_json()


def credential_line(cred: dict[str, Any]) -> str:
    """The text status's credential line."""
    if cred["model_work"]:
        return f"model work: on ({cred['kind']}: {cred['description']})\n"
    return f"model work: off ({cred['kind']}: {cred['description']}) - {cred['off_reason']}\n"
