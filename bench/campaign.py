"""Shared by the reliability campaigns (bench/crash_consistency.py, bench/concurrent_writers.py,
bench/faults.py) and their quick tiers in tests/: real memory folders copied from
../shared/claude-data, a scripted model through the loopback stub, and the checks every campaign makes
(each file before or after, no temp file, the index links no missing file, the history readable),
and the children a campaign kills (a dream, a rebuild, an undo).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from memd import history  # noqa: E402
from memd.config import Config, DreamConfig, ModelConfig, replace  # noqa: E402
from memd.core import lint  # noqa: E402
from memd.core.paths import INDEX_NAME, is_topic  # noqa: E402
from memd.jobs import JobContext  # noqa: E402
from memd.layout import Project  # noqa: E402
from memd.memfolder.folder import read_folder  # noqa: E402
from memd.store import is_memd_temp  # noqa: E402
from tests.plugins.stub_api import StubAPI  # noqa: E402

CLAUDE_DATA = ROOT.parent / "shared" / "claude-data" / "projects"
OLD = time.time() - 3 * 86400
LOCK = ".consolidate-lock"  # Claude Code's lock: memd takes it, so it comes and goes


def _one_tls_context() -> None:
    """The SDK builds a TLS context for every client (~0.4 s: it loads the CA bundle), and a campaign makes
    thousands of clients that talk plain HTTP to the loopback stub: build it once per process."""
    import httpcore2

    ctx = httpcore2.default_ssl_context()
    httpcore2.default_ssl_context = lambda **_: ctx  # type: ignore[assignment]


_one_tls_context()


def real_memory_folders() -> list[Path]:
    """The memory folders of ../shared/claude-data that have an index (empty when it is absent)."""
    if not CLAUDE_DATA.is_dir():
        return []
    return sorted(p.parent for p in CLAUDE_DATA.glob("*/memory/MEMORY.md") if not p.parent.is_symlink())


def copy_project(src_memory: Path, claude: Path, name: str) -> Project:
    """A copy of a real memory folder as project ``name`` of the Claude folder ``claude``."""
    d = claude / "projects" / name
    if d.exists():
        shutil.rmtree(d)
    shutil.copytree(src_memory, d / "memory", symlinks=True)
    for p in (d / "memory").rglob("*"):
        if p.is_file() and not p.is_symlink():
            p.chmod(0o644)
            os.utime(p, (OLD, OLD))
    return Project(name, d, d / "memory")


def tree(folder: Path) -> dict[str, bytes]:
    """Every regular file under folder (memd's temp files too), Claude Code's lock left out."""
    if not folder.is_dir():
        return {}
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.is_symlink() and p.name != LOCK}


def write_tree(folder: Path, files: dict[str, bytes]) -> None:
    """Make folder hold exactly files (memd's state is not touched)."""
    if folder.exists():
        shutil.rmtree(folder)
    for rel, data in files.items():
        p = folder / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        os.utime(p, (OLD, OLD))


def temps(folder: Path) -> list[str]:
    return [str(p.relative_to(folder)) for p in folder.rglob("*") if is_memd_temp(p.name)] if folder.is_dir() else []


def dangling(folder: Path) -> list[str]:
    """MEM005 findings: index entries that link a missing file."""
    return [f.message for f in lint.lint(read_folder(folder)) if f.code == "MEM005"]


def history_readable(state_dir: Path, project: str) -> int:
    """Every commit of the project's history and every tree in it can be read; returns the count."""
    from dulwich.repo import Repo

    path = history.repo_dir(state_dir, project)
    if not (path / "HEAD").exists():
        return 0
    repo = Repo(str(path))
    try:
        n = 0
        if b"refs/heads/main" not in repo.refs:
            return 0  # made, no commit yet (a kill right after the history's first setup)
        head = repo.refs[b"refs/heads/main"]
        for entry in repo.get_walker(include=[head]):
            history._files_of_tree(repo, entry.commit.tree)
            n += 1
        return n
    finally:
        repo.close()


def config(base_url: str, **dream: Any) -> Config:
    return Config(model=replace(ModelConfig(), base_url=base_url, max_retries=0, timeout_s=10.0),
                  dream=replace(DreamConfig(), max_tool_turns=6, **dream))


def job_context(cfg: Config, claude: Path, state_dir: Path, state: Any, **kw: Any) -> JobContext:
    return JobContext(config=cfg, claude_dir=claude, state_dir=state_dir, state=state, force=True, **kw)


def topic_files(files: dict[str, bytes]) -> list[str]:
    return sorted(r for r in files if r != INDEX_NAME and "/" not in r and is_topic(r) and r.endswith(".md"))


def dream_script(stub: StubAPI, files: dict[str, bytes], seed: int, *, edits: int = 2, creates: int = 2,
                 delete: bool = True) -> list[dict[str, Any]]:
    """A model's consolidation of a folder: a dated line appended to ``edits`` topic files, ``creates``
    new topic files, and (``delete``, with at least 10 topics) one topic file deleted. Deterministic in
    ``seed``: the same script gives the same result."""
    import random

    rng = random.Random(seed)
    topics = topic_files(files)
    picked = rng.sample(topics, min(edits + (1 if delete else 0), len(topics)))
    gone = picked.pop() if delete and len(topics) >= 10 and picked else None
    calls: list[dict[str, Any]] = []
    for rel in picked:
        text = files[rel].decode("utf-8", "replace")
        lines = text.split("\n")
        n = len(lines) - 1 if lines and lines[-1] == "" else len(lines)
        calls.append(stub.memory("insert", path=f"/memories/{rel}", insert_line=n,
                                 insert_text=f"Checked again on 2026-12-01 (trial {seed})."))
    for i in range(creates):
        calls.append(stub.memory("create", path=f"/memories/project_trial_{seed}_{i}.md", file_text=(
            f"---\nname: Trial {seed} fact {i}\ndescription: a fact a trial saved ({seed}.{i})\n"
            f"type: project\n---\nThe deploy freeze for trial {seed} ends on 2026-12-0{1 + i % 8}.\n")))
    if gone is not None:
        calls.append(stub.memory("delete", path=f"/memories/{gone}", reason="dup"))
    return [stub.message(*calls), stub.message(stub.text(f"consolidated (trial {seed})"))]


def clear(stub: StubAPI) -> None:
    """Drop what a killed run left in the stub's queue."""
    with stub._lock:
        stub._queue.clear()


def dream_child(base_url: str, claude: str, state_dir: str, name: str, spec: str) -> None:
    """One dream in a child process (forkserver), with ``spec`` armed (``MEMD_FAULT``'s syntax); exits 0
    when it changed the folder, 1 otherwise. A fault point or the parent's SIGKILL ends it earlier."""
    from memd import store
    from memd.jobs.runner import run_job
    from memd.state import StateStore

    store.set_faults(spec)
    sd = Path(state_dir)
    d = Path(claude) / "projects" / name
    with StateStore.open(sd) as state:
        res = run_job("dream", job_context(config(base_url), Path(claude), sd, state), [Project(name, d, d / "memory")])
    os._exit(0 if res.outcomes and res.outcomes[0].outcome == "changed" else 1)


def history_child(op: str, claude: str, state_dir: str, name: str, spec: str) -> None:
    """One ``rebuild`` or ``undo`` (of the newest run) of project ``name`` in a child process (forkserver),
    with ``spec`` armed (``MEMD_FAULT``'s syntax); exits 0 when it wrote, 1 otherwise. A fault point or the
    parent's SIGKILL ends it earlier."""
    from memd import store
    from memd.core.rebuild import NORMALISE
    from memd.maintenance import rebuild_project, undo_project

    store.set_faults(spec)
    d = Path(claude) / "projects" / name
    project = Project(name, d, d / "memory")
    if op == "rebuild":
        wrote = rebuild_project(project, Config(), Path(state_dir), dry_run=False, mode=NORMALISE).written
    else:
        res, _ = undo_project(project, Config(), Path(state_dir), None, dry_run=False)
        wrote = bool(res.restored or res.removed)
    os._exit(0 if wrote else 1)


def forkserver() -> Any:
    """A multiprocessing context whose children start with memd and the SDK already imported."""
    import multiprocessing

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["bench.campaign", "memd.jobs.dream", "memd.jobs.catchup", "memd.maintenance",
                                "memd.projlock", "dulwich.repo", "anthropic"])
    return ctx


def run_trials(campaign: Any, trials: int, t0: float, *, minutes: float = 0.0, progress: bool = False) -> int:
    """Run ``campaign.trial(n)`` for n in range(trials) until the time budget (``minutes`` after ``t0``;
    0: none) is spent; with ``progress``, each new violation and every 25 trials on stderr. Returns how
    many trials ran (the figures say so when the budget cut them)."""
    import sys
    import time

    done = 0
    for n in range(trials):
        if minutes and time.monotonic() - t0 > minutes * 60:
            break
        done += 1
        seen = len(campaign.violations)
        campaign.trial(n)
        if progress:
            for v in campaign.violations[seen:]:
                print("violation:", v, file=sys.stderr, flush=True)
            if (n + 1) % 25 == 0:
                print(f"{n + 1} trials, {len(campaign.violations)} violations, {time.monotonic() - t0:.0f} s",
                      file=sys.stderr, flush=True)
    return done

