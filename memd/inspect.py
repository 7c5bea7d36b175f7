"""What `memd check` and `memd status` report about a project's memory, below the door.

``check_project`` lints one memory folder and measures its index (``ProjectCheck``; unchanged folders
answer from memd.checkcache); ``check_projects`` does it for a selection; ``status_rows`` turns checks into
the rows `memd status` shows (``StatusRow``, with the newest session's time). The commands parse their
arguments, call one of these and print. Reads through memd.memfolder; decides nothing the core does not.
"""

from __future__ import annotations

import time

from memd.record import Record, field

TYPE_CHECKING = False  # (typing and dataclasses are not imported: `memd check` starts through here)
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

    from memd.config import BudgetConfig, Config
    from memd.core.files import FolderSnapshot
    from memd.core.findings import Finding
    from memd.core.index import Budget
    from memd.layout import Project


class ProjectCheck(Record):
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
                   *, team_pii: bool = True, state_dir: Path | None = None) -> ProjectCheck:
    """Lint one read folder and measure its index (also used by `memd status`). ``state_dir``: memd's
    state folder, where the days of the sessions a catch-up wrote a file from are kept (MEM040's hint)."""
    from memd.core import lint

    if not snap.exists:
        return ProjectCheck(project, snap.exists, max_lines=budget.max_lines, max_chars=budget.max_chars)
    said_on = None
    if state_dir is not None:
        from memd.memfolder.saidon import days_for

        said_on = days_for(state_dir, project.name, snap.files)
    report = lint.check(snap, budget, team_pii=team_pii, today=time.strftime("%Y-%m-%d"), said_on=said_on)
    b = report.budget
    figures = (b.lines, b.chars, len(b.hidden), b.level) if b is not None else (0, 0, 0, "ok")
    lines, chars, hidden, level = figures
    return ProjectCheck(project, True, lines, chars, budget.max_lines, budget.max_chars, hidden, level,
                        sum(1 for _ in snap.topics()), report.findings)


def check_project(project: Project, budget: BudgetConfig, *, team_pii: bool = True,
                  cache_dir: Path | None = None, state_dir: Path | None = None) -> ProjectCheck:
    """Check one project; with cache_dir (memd's state folder), an unchanged folder reuses its result.
    ``state_dir``: memd's state folder without its cache (``--no-cache``), for MEM040's session days."""
    return _check(project, budget, team_pii, cache_dir, state_dir)[0]


def _check(project: Project, budget: BudgetConfig, team_pii: bool,
           cache_dir: Path | None, state_dir: Path | None = None) -> tuple[ProjectCheck, bool]:
    """(the check, whether it is the cached result)."""
    from memd.memfolder.folder import read_folder

    key = walked = None
    if cache_dir is not None:
        from memd import checkcache

        key, hit = checkcache.lookup(cache_dir, project.memory_dir, budget, team_pii)
        if hit is not None:
            try:
                return ProjectCheck.from_cache(project, budget, hit), True
            except (KeyError, TypeError, ValueError):
                pass
        walked = checkcache.walk_of(key)  # the listing the key was made from: not listed twice
    snap = read_folder(project.memory_dir, budget, signatures=False, walked=walked)  # check never writes
    idx = snap.index
    res = check_snapshot(project, snap, project_limits(project, budget, idx.text if idx is not None else None),
                         team_pii=team_pii, state_dir=cache_dir or state_dir)
    if cache_dir is not None:
        from memd import checkcache

        newest = max((f.mtime for f in snap.files if f.mtime is not None), default=None)
        checkcache.store(cache_dir, project.memory_dir, key, res.cache_data(), newest)
    return res, False


class CheckReport(Record):
    results: list[ProjectCheck]
    skipped: int  # projects without a memory folder left out of ``results``

    @property
    def has_errors(self) -> bool:
        return any(f.severity == "error" for r in self.results for f in r.findings)


PARALLEL_MIN = 128  # projects: below this, starting workers costs more than it saves


def parallel_jobs(jobs: int | None, n: int) -> int:
    """How many processes check ``n`` projects: ``jobs`` (None: one per CPU this process may use), one when
    there are fewer than PARALLEL_MIN projects or the platform is not Linux (elsewhere a forked child of a
    process that touched the system's frameworks may crash; spawning a fresh interpreter per worker costs
    more than a check of a thousand projects)."""
    import os
    import sys

    if jobs is None:
        try:
            jobs = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            jobs = os.cpu_count() or 1
        jobs = min(jobs, 8)
    if jobs <= 1 or n < PARALLEL_MIN or not sys.platform.startswith("linux"):
        return 1
    return min(jobs, n)


def check_projects(projects: list[Project], config: Config, *, cache_dir: Path | None = None,
                   skip_missing: bool = False, step: Callable[[str], None] | None = None,
                   jobs: int = 1, state_dir: Path | None = None) -> CheckReport:
    """Check each project (``skip_missing``: leave out, and count, those without a memory folder;
    ``step``: told each project's name as it is done, for a progress bar; ``jobs``: processes to use,
    see ``parallel_jobs``; ``state_dir``: memd's state folder when no cache is used, for MEM040's hint)."""
    def each() -> list[ProjectCheck]:
        if jobs > 1:
            return _check_parallel(projects, config, cache_dir, jobs, step, state_dir)
        return _finish(projects, [None] * len(projects), config, cache_dir, step, state_dir)

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


# What forked workers check: set by the parent before it forks, read by the children (never pickled).
_WORK: tuple[list[Project], BudgetConfig, bool, Path | None, Path | None] | None = None


def _check_chunk(chunk: list[int]) -> tuple[list[tuple[int, dict[str, Any] | None]], dict[str, Any]]:
    """A worker's share: each project's result as cache data (None: the cached result the parent holds
    too), and the cache entries the share added or renewed."""
    from memd import checkcache

    assert _WORK is not None
    projects, budget, team_pii, cache_dir, state_dir = _WORK
    out: list[tuple[int, dict[str, Any] | None]] = []
    if cache_dir is not None:
        checkcache.take_changed(cache_dir)  # what an earlier share sent already, or the parent's own
    for i in chunk:
        res, cached = _check(projects[i], budget, team_pii, cache_dir, state_dir)
        out.append((i, None if cached else res.cache_data()))  # cached: only with a cache
    return out, checkcache.take_changed(cache_dir) if cache_dir is not None else {}


def _check_parallel(projects: list[Project], config: Config, cache_dir: Path | None, jobs: int,
                    step: Callable[[str], None] | None, state_dir: Path | None = None) -> list[ProjectCheck]:
    """Check the projects in ``jobs`` forked processes, results in order (in this process when workers
    cannot be had, or too few folders are left to check). The folders the cache's quick check answers
    for are answered here first (a repeated run forks nothing); the children inherit the rest and the
    cache as read, and each sends back its results and new cache entries, which the parent keeps as if
    it had checked them itself."""
    global _WORK
    import multiprocessing
    import sys

    from memd import checkcache

    budget, team_pii = config.budget, config.hooks.team_pii
    results: list[ProjectCheck | None] = [None] * len(projects)
    todo = list(range(len(projects)))
    if cache_dir is not None:
        todo = []
        for i, p in enumerate(projects):
            hit = checkcache.quick_hit(cache_dir, p.memory_dir, budget, team_pii)
            try:
                results[i] = ProjectCheck.from_cache(p, budget, hit) if hit is not None else None
            except (KeyError, TypeError, ValueError):
                pass
            if results[i] is None:
                todo.append(i)
            elif step is not None:
                step(p.name)
    if len(todo) < PARALLEL_MIN:
        return _finish(projects, results, config, cache_dir, step, state_dir)
    size = max(16, min(256, len(todo) // (jobs * 8) or 1))
    chunks = [todo[i:i + size] for i in range(0, len(todo), size)]
    found: dict[int, dict[str, Any] | None] = {}
    changed: dict[str, Any] = {}
    sys.stdout.flush()
    sys.stderr.flush()
    _WORK = (projects, budget, team_pii, cache_dir, state_dir)
    try:
        try:
            pool = multiprocessing.get_context("fork").Pool(min(jobs, len(chunks)))
        except (OSError, ValueError):
            return _finish(projects, results, config, cache_dir, step, state_dir)
        with pool:
            for out, new in pool.imap_unordered(_check_chunk, chunks):
                changed.update(new)
                for i, data in out:
                    found[i] = data
                    if step is not None:
                        step(projects[i].name)
    finally:
        _WORK = None
    if cache_dir is not None:
        checkcache.add_changed(cache_dir, changed)
    for i, data in found.items():
        if data is None and cache_dir is not None:  # the cached result, as the parent holds it
            data = checkcache.result_of(cache_dir, projects[i].memory_dir)
        try:
            results[i] = ProjectCheck.from_cache(projects[i], budget, data) if data is not None else None
        except (KeyError, TypeError, ValueError):
            pass
    return _finish(projects, results, config, cache_dir, None, state_dir)


def _finish(projects: list[Project], results: list[ProjectCheck | None], config: Config, cache_dir: Path | None,
            step: Callable[[str], None] | None, state_dir: Path | None = None) -> list[ProjectCheck]:
    """The results, each project still without one checked here, in this process (``step`` told each
    name as it starts)."""
    done: list[ProjectCheck] = []
    for p, r in zip(projects, results, strict=True):
        if r is None:
            if step is not None:
                step(p.name)
            r = check_project(p, config.budget, team_pii=config.hooks.team_pii, cache_dir=cache_dir,
                              state_dir=state_dir)
        done.append(r)
    return done


class StatusRow(Record):
    project: str
    memory_dir: str
    has_memory: bool
    topic_files: int
    index_lines: int
    max_lines: int
    index_chars: int
    max_chars: int
    level: str  # ok | near | over | error (the index cannot be read whole: ``problem``) | none (no memory)
    hidden_entries: int
    findings: dict[str, int]  # error / warning / info -> count
    last_session: float | None  # mtime of the newest main-session transcript
    problem: str | None = None  # why the index (or the folder) cannot be read whole; level is "error"
    measured_level: str | None = None  # with a problem: the level of what could be read, as the hooks see it
    extra: dict[str, Any] = field(default_factory=dict)  # other parts of memd add columns here

    def as_json(self) -> dict[str, Any]:
        return {
            "project": self.project, "memory_dir": self.memory_dir, "has_memory": self.has_memory,
            "topic_files": self.topic_files,
            "index": {"lines": self.index_lines, "max_lines": self.max_lines, "chars": self.index_chars,
                      "max_chars": self.max_chars, "level": self.level, "hidden_entries": self.hidden_entries,
                      "problem": self.problem, "measured_level": self.measured_level},
            "findings": dict(self.findings),
            "last_session": _iso(self.last_session),
            **self.extra,
        }


def _iso(t: float | None) -> str | None:
    if t is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def last_session(project: Project) -> float | None:
    return newest_session(project)[1]


def newest_session(project: Project) -> tuple[Path | None, float | None]:
    """The project's newest main-session transcript and its mtime (one listing: status reads both the
    time and, for whether memory is off, the transcript's working folder)."""
    from memd import layout

    newest: tuple[Path | None, float | None] = (None, None)
    for p in layout.session_files(project.dir):
        if not layout.is_uuid_session(p):
            continue
        try:
            m = p.stat().st_mtime
        except OSError:
            continue
        if newest[1] is None or m > newest[1]:
            newest = (p, m)
    return newest


class IndexMeasure(Record):
    """A project's MEMORY.md measured the way the SessionStart hook measures it."""

    budget: Budget | None  # None: nothing could be read (no index, or unreadable)
    problem: str | None  # why it cannot be read whole (too large, unreadable, not a file, not UTF-8)


def project_limits(project: Project, budget: BudgetConfig, text: str | None) -> BudgetConfig:
    """The budget with the Claude Code version of the project's newest session, when the index
    ``text`` holds what versions load differently (a comment and a link reference definition) and
    ``budget.claude_code_version`` names none: the loaded view follows the version the user runs
    (unknown: the newest)."""
    from memd.core.budget import version_tuple

    if text is None or "<!--" not in text or "]:" not in text or version_tuple(budget.claude_code_version):
        return budget
    from memd.ccsettings import transcript_version

    newest = newest_session(project)[0]
    version = transcript_version(str(newest)) if newest is not None else None
    if version is None:
        return budget
    from memd.record import replace

    return replace(budget, claude_code_version=".".join(map(str, version)))


def measure_index(project: Project, budget: BudgetConfig) -> IndexMeasure:
    """Measure MEMORY.md as the SessionStart hook does (``memd.hooks.tool_use.read_text``): at most
    ``max_file_bytes`` read (a longer file is cut there and measured), undecodable bytes replaced, so
    `memd status` and the hook give one figure for one file. Whatever stops a whole read is the problem."""
    import os

    from memd.core.paths import INDEX_NAME
    from memd.memfolder.read import read_bounded
    from memd.memfolder.walk import locate

    path = locate(project.memory_dir, INDEX_NAME, None)
    if path is None:
        what = _unmeasurable(project.index_path)
        return IndexMeasure(None, None if what is None else f"{what}, so it cannot be measured")
    r = read_bounded(path, budget.max_file_bytes, hash=False, cut=True)
    if r.data is None:
        if r.problem == "missing":
            return IndexMeasure(None, None)
        return IndexMeasure(None, f"{_read_problem(r.problem)}, so it cannot be measured")
    problem = r.problem  # "not valid UTF-8" (measured with replacement characters, as the hook does)
    if r.cut:
        try:
            size = f"{os.stat(path).st_size:,} bytes"
        except OSError:
            size = "larger"
        problem = f"too large to read whole ({size}, limit {budget.max_file_bytes:,})"
    return IndexMeasure(measure_index_bytes(project, budget, r.data), problem)


def measure_index_bytes(project: Project, budget: BudgetConfig, data: bytes) -> Budget:
    """MEMORY.md's bytes measured as ``measure_index`` measures the file (the first ``max_file_bytes``,
    undecodable bytes replaced, the loading of the user's Claude Code version): for an index that is
    not on disk, as a history snapshot's (the viewer's index-size chart)."""
    from memd.core import index
    from memd.core.budget import refdefs_kept

    text = data[:budget.max_file_bytes].decode("utf-8", errors="replace")
    b = project_limits(project, budget, text)
    return index.measure(text, b.max_lines, b.max_chars, b.warn_ratio, refdefs=refdefs_kept(b))


def _unmeasurable(index_path: Path) -> str | None:
    """Why memd will not read the index at index_path, in words (None: there is none). An index
    that exists but cannot be opened (mode 000) was called "not a regular file"."""
    import os
    import stat

    try:
        st = os.lstat(index_path)
    except FileNotFoundError:
        return None
    except OSError as e:
        return f"cannot be looked at ({e.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "is a folder, not a file" if os.path.isdir(index_path) else "is a symlink memd does not follow"
    if stat.S_ISDIR(st.st_mode):
        return "is a folder, not a file"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file (a FIFO, socket or device)"
    if not os.access(index_path, os.R_OK):
        return "cannot be read (permission denied)"
    return "cannot be read"


def _read_problem(problem: str | None) -> str:
    """read_bounded's problem as the rest of a sentence that starts "MEMORY.md ..."."""
    if not problem:
        return "cannot be read"
    if problem.startswith("unreadable"):
        return "cannot be read" + problem[len("unreadable"):]  # "... (Permission denied)"
    if problem.startswith(("is ", "not ")):
        return problem if problem.startswith("is ") else "is " + problem
    return problem


def status_row(project: Project, config: Config, cache_dir: Path | None = None) -> StatusRow:
    from memd.core.findings import counts

    b = config.budget
    res = check_project(project, b, team_pii=config.hooks.team_pii, cache_dir=cache_dir)
    session, session_time = newest_session(project)
    row = StatusRow(
        project.name, str(project.memory_dir), res.exists, res.topic_files, res.lines, b.max_lines,
        res.chars, b.max_chars, res.level if res.exists else "none", res.hidden_entries,
        counts(res.findings), session_time)
    if not res.exists:
        return row
    off = project_memory_off(project, session)
    if off:
        row.extra["memory_off"] = off
    blocks = sum(1 for f in res.findings if f.code == "MEM090")
    if blocks:  # issue 21: sync conflict blocks waiting for the user (or the dream)
        row.extra["sync_conflicts"] = blocks
    # status measures the index itself (never only what the daemon recorded), as the hook does
    folder_problem = next((f.message for f in res.findings if f.code == "MEM071"), None)
    m = measure_index(project, b)
    changes: dict[str, Any] = {}
    if m.budget is not None:
        changes.update(index_lines=m.budget.lines, index_chars=m.budget.chars, hidden_entries=len(m.budget.hidden),
                       level=m.budget.level)
    if folder_problem or m.problem:
        changes.update(problem=folder_problem or f"MEMORY.md {m.problem}",
                       measured_level=m.budget.level if m.budget is not None else None, level="error")
    if changes:
        from memd.record import replace

        row = replace(row, **changes)
    return row


def status_rows(projects: list[Project], config: Config, cache_dir: Path | None = None) -> list[StatusRow]:
    """One row per project, those with a memory folder first; cache_dir (memd's state folder) lets
    unchanged folders skip the re-check."""
    import contextlib

    from memd import checkcache

    # one write of the shared cache at the end, as `check --all` does: written after every project it
    # made `status` over uncached projects quadratic (the whole file re-read and rewritten each time)
    with checkcache.batch(cache_dir) if cache_dir is not None else contextlib.nullcontext():
        rows = [_isolated_status_row(p, config, cache_dir) for p in projects]
    return sorted(rows, key=lambda r: not r.has_memory)  # stable: by name within each group


def _isolated_status_row(project: Project, config: Config, cache_dir: Path | None) -> StatusRow:
    """A failure while measuring one project is that project's ERROR row, with the reason; the
    others are measured as ever (one bad folder name failed `memd status` for every project)."""
    try:
        return status_row(project, config, cache_dir)
    except Exception as e:  # any: the rule is one project, one row
        b = config.budget
        return StatusRow(project.name, str(project.memory_dir), True, 0, 0, b.max_lines, 0, b.max_chars,
                         "error", 0, {}, None, problem=f"cannot be measured: {type(e).__name__}: {e}")


def conflict_blocks_line(rows: list[StatusRow]) -> str:
    """``memd status``'s line for unresolved sync conflict blocks, by project ("" when there are none)."""
    found = {r.project: int(r.extra.get("sync_conflicts", 0)) for r in rows if r.extra.get("sync_conflicts")}
    if not found:
        return ""
    listed = ", ".join(f"{n} ({k})" for n, k in found.items())
    return (f"sync: {sum(found.values())} conflict block(s) in memory files to resolve (`memd check` shows "
            f"where): {listed}\n")


MEASURED_KINDS = ("budget", "topic_files")  # the daemon's warning kinds status measures itself
_LEVEL_WORDS = {"ok": "within", "near": "near", "over": "over"}  # a level in a sentence ("is ok the budget" was one)


def _share(row: StatusRow) -> str:
    # the hook's figure (memd.hooks.tool_use): the larger of the two ratios, of what Claude Code loads
    return f"{max(row.index_lines / row.max_lines, row.index_chars / row.max_chars):.0%}"


def measured_warnings(rows: list[StatusRow], config: Config) -> list[dict[str, Any]]:
    """The warnings `memd status` measures now (never only what the daemon recorded): an index that
    cannot be read whole, over or near its budget, more topic files than recall reads."""
    out: list[dict[str, Any]] = []
    limit = config.budget.max_topic_files
    for r in rows:
        figures = (f"{r.index_lines:,}/{r.max_lines} lines, {r.index_chars:,}/{r.max_chars:,} characters, "
                   f"{_share(r)} of what Claude Code loads")
        if r.level == "error":
            text = f"{r.project}: {r.problem}"
            if r.measured_level is not None:  # the index was read all the same (cut, or its folder unlistable)
                level = _LEVEL_WORDS.get(r.measured_level, r.measured_level)
                text += f"; what a session loads of MEMORY.md is {level} the budget ({figures})"
            out.append({"project": r.project, "kind": "budget", "level": "error", "text": text})
        elif r.level in ("near", "over"):
            hidden = f"; {r.hidden_entries} entries hidden" if r.hidden_entries else ""
            out.append({"project": r.project, "kind": "budget", "level": r.level,
                        "text": f"{r.project}: MEMORY.md {r.level} the budget ({figures}){hidden}"})
        if r.has_memory and r.topic_files > limit:
            out.append({"project": r.project, "kind": "topic_files", "level": "over",
                        "text": f"{r.project}: {r.topic_files} topic files; recall reads only {limit}"})
        off = r.extra.get("memory_off")
        if off:
            out.append({"project": r.project, "kind": "memory_off", "level": "info",
                        "text": f"{r.project}: Claude Code's auto memory is off here ({off}); memd's jobs "
                                "leave it alone"})
    return out


def project_memory_off(project: Project, session: Path | None) -> str | None:
    """Why Claude Code's auto memory is off for the project (the environment, or any settings scope of
    the repository its newest ``session`` ran in), or None. Only that transcript's head is read."""
    from memd.layout import memory_off_for
    from memd.transcripts.sessions import first_cwd

    cwd = first_cwd(session, 32_768) if session is not None else None  # the first records carry it
    return memory_off_for(project.dir.parent.parent, [cwd] if cwd else [])


def model_credential(config: Config, claude: Path | None = None, state_dir: Path | None = None) -> dict[str, Any]:
    """Which credential source model work uses and whether it is on (never the secret): the
    ``model`` part of ``memd status``. ``claude``: the Claude folder whose settings count (default:
    the config's). With ``model.backend = "claude-plan"``: the CLI memd runs, its version and login
    (``claude auth status``, never a credential file) and this month's spend against
    ``model.monthly_budget_usd`` (read from ``state_dir``). With the ``api`` backend and no
    credential, a logged-in CLI is named with the setting that would use it (``hint``)."""
    from memd import layout
    from memd.llm import plan
    from memd.llm.client import credential_source

    if config.model.backend == plan.BACKEND:
        return _plan_credential(config, state_dir)
    out = {"backend": "api", **credential_source(config, None, None if claude is None
                                                  else layout.read_settings(claude)).as_json()}
    if not out["model_work"] and out["kind"] == "none":
        hint = plan.logged_in_hint(config)
        if hint:
            out["hint"] = hint
    return out


def _plan_credential(config: Config, state_dir: Path | None) -> dict[str, Any]:
    import time

    from memd.llm import plan

    off = plan.off_reason(config)
    cli = plan.cli_status(config)
    spent: float | None = 0.0  # no state yet: nothing spent
    from memd.state import FILENAME, StateStore

    if state_dir is not None and (state_dir / FILENAME).exists():

        try:
            with StateStore.open(state_dir, timeout=2.0) as st:
                spent = plan.month_spend(st, time.time())
                off = off or plan.budget_reason(config, st, time.time())
        except Exception:  # status reports what it can: an unreadable state is said elsewhere
            spent = None
    who = f"{cli.auth_method}, {cli.subscription} plan" if cli.subscription else (cli.auth_method or "no login")
    desc = (f"the claude CLI {cli.path} {cli.version or '(version unknown)'} ({who})" if cli.path
            else "no claude CLI")
    return {"backend": plan.BACKEND, "kind": "claude_plan", "description": desc, "model_work": off is None,
            "off_reason": off, "cli": cli.as_json(), "month_spend_usd": spent,
            "monthly_budget_usd": config.model.monthly_budget_usd}


def credential_line(cred: dict[str, Any]) -> str:
    """The text status's credential line (and, for the claude-plan backend, the month's spend)."""
    spend = ""
    if cred.get("backend") == "claude-plan":
        cap = cred.get("monthly_budget_usd") or 0
        spent = cred.get("month_spend_usd")
        spent_s = f"${spent:.2f}" if isinstance(spent, (int, float)) else "unknown"
        spend = (f"model spend this month (claude-plan, as the CLI reports it): {spent_s}"
                 + (f" of model.monthly_budget_usd ${cap:.2f}" if cap else " (no monthly cap)") + "\n")
    if cred["model_work"]:
        return f"model work: on ({cred['kind']}: {cred['description']})\n" + spend
    line = f"model work: off ({cred['kind']}: {cred['description']}) - {cred['off_reason']}\n"
    if cred.get("hint"):
        line += f"  {cred['hint']}\n"
    return line + spend
