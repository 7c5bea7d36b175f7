"""`memd forget`: take a string, a pattern or every secret out of a project's memory **and** its history.

History, snapshots and runs keep whatever once reached memory, secrets included; undoing a run could
even bring one back. Forgetting therefore works on both:

1. the live memory files (team/ aside, never written): each match is replaced by ``[forgotten]``, through
   the writers' one rule (under the project lock, after a snapshot, atomically, never over a file that
   changed since it was read), recorded as a run of its own (``forget``), so the change shows in
   ``memd history``;
2. the project's history (``memd.history``, a bare git repository): every commit is rewritten with the
   same replacement in every file it holds and in its message (the trailers that name runs are kept, so
   ``memd history`` and ``memd undo`` work as before on the rewritten commits), the branch moved to the
   rewritten tip, and the objects only the old commits reached deleted by dulwich's own garbage collector
   (no grace period: they hold what is being forgotten). Then every object left is read back and checked.

A dry run (the default) changes nothing and says what would change: files, matches, commits.
The rewrite of memd's history is dulwich objects written anew and dulwich's garbage collector
(``rewrite_commits``, ``prune``, ``objects_holding``: any dulwich repository), and is itself recorded: a
``rewrite`` commit saying how many commits were rewritten, never what was taken out.

With sync on, the command also rewrites the project's branch on the remote and pushes a record that the
other machines honour at their next sync (``memd.sync.forget``; docs/sync.md, "Forgetting").
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memd.core import forgetting
from memd.core.paths import is_team
from memd.errors import UsageError

if TYPE_CHECKING:
    from memd.config import Config
    from memd.layout import Project

MARK = "[forgotten]"
Matcher = Callable[[str], list[tuple[int, int]]]  # text -> the (start, end) spans to forget


def matcher(*, string: str | None = None, pattern: str | None = None, secrets: bool = False) -> Matcher:
    """What to forget: a literal string, a regular expression, or every secret the rules find."""
    if sum(x is not None for x in (string, pattern, True if secrets else None)) != 1:
        raise UsageError("give exactly one of --string, --pattern or --secrets")
    if string is not None:
        if not string.strip():
            raise UsageError("--string is empty")
        needle = string

        def find_string(text: str) -> list[tuple[int, int]]:
            out, at = [], text.find(needle)
            while at >= 0:
                out.append((at, at + len(needle)))
                at = text.find(needle, at + len(needle))
            return out

        return find_string
    if pattern is not None:
        try:
            rx = re.compile(pattern)
        except re.error as e:
            raise UsageError(f"--pattern is not a regular expression: {e}") from None

        def find_pattern(text: str) -> list[tuple[int, int]]:
            return [(m.start(), m.end()) for m in rx.finditer(text) if m.end() > m.start()]

        return find_pattern
    from memd.core import secrets as secret_rules

    def find_secrets(text: str) -> list[tuple[int, int]]:
        return [(start, end) for _kind, start, end in secret_rules.spans(text)]

    return find_secrets


def forgotten(text: str, find: Matcher) -> tuple[str, int]:
    """text with every span ``find`` gives replaced by ``[forgotten]`` (overlaps merged), and the count."""
    spans = sorted(find(text))
    if not spans:
        return text, 0
    out, at, n = [], 0, 0
    for start, end in spans:
        if end <= at:
            continue
        start = max(start, at)
        out.append(text[at:start])
        out.append(MARK)
        at, n = end, n + 1
    out.append(text[at:])
    return "".join(out), n


def _bytes(data: bytes, find: Matcher) -> tuple[bytes, int]:
    text = data.decode("utf-8", "surrogateescape")
    new, n = forgotten(text, find)
    return (new.encode("utf-8", "surrogateescape"), n) if n else (data, 0)


@dataclass
class ForgetResult:
    applied: bool
    files: dict[str, int] = field(default_factory=dict)  # live file -> matches taken out
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, why not written)
    commits: int = 0  # history commits holding a match (rewritten when applied)
    commits_total: int = 0
    pruned: int = 0  # objects deleted from the history
    left: int = 0  # objects still holding a match after the rewrite (must be 0)
    run: str = ""
    evidence: int = 0  # sync conflict records (memd's state) holding a match (rewritten when applied)
    resumed: list[str] = field(default_factory=list)  # interrupted forgets this one finished, in words
    unfinished: list[str] = field(default_factory=list)  # (a dry run) interrupted forgets --apply would finish


def forget_project(project: Project, config: Config, state_dir: Path, find: Matcher | None, *, apply: bool,
                   clock_time: float | None = None, why: str = "", record: forgetting.Record | None = None,
                   ) -> ForgetResult:
    """Plan, and with ``apply`` do, the forgetting of one project (see the module doc). Applied, it first
    finishes every forget of the project a kill interrupted (``pending``); ``find`` None does only that
    (``memd forget PROJECT --finish``). ``record`` (what is forgotten, never the thing itself) is kept in
    the state while the forget runs, so a killed one can be finished."""
    import time

    from memd.projlock import project_lock

    res = ForgetResult(apply)
    now = time.time() if clock_time is None else clock_time
    with project_lock(state_dir, project.name, "forget"):
        if not apply:
            res.unfinished = [_describe(e) for e in pending(state_dir).get(project.name, {}).values()]
            if find is not None:
                _forget_locked(project, config, state_dir, find, res, apply=False, now=now, why=why)
            return res
        _make_whole(project, state_dir)
        for rid, entry in sorted(pending(state_dir).get(project.name, {}).items()):
            again = _resume_find(entry, project, state_dir)
            if again is not None:
                _forget_locked(project, config, state_dir, again, ForgetResult(True), apply=True, now=now,
                               why=str(entry.get("why", "")))
            _journal(state_dir, project.name, rid, None)
            res.resumed.append(_describe(entry))
        if find is None:
            return res
        rid = os.urandom(8).hex() if record is not None else ""
        if record is not None:
            _journal(state_dir, project.name, rid, {"record": record.as_dict(), "started": now, "why": why})
        _forget_locked(project, config, state_dir, find, res, apply=True, now=now, why=why)
        if rid:
            _journal(state_dir, project.name, rid, None)
    return res


def _forget_locked(project: Project, config: Config, state_dir: Path, find: Matcher, res: ForgetResult, *,
                   apply: bool, now: float, why: str) -> None:
    """The forgetting itself (the project lock is held). Every stage can be run again after a kill in any
    other: the live files are found by their content, the rewrite is deterministic (the same commits get
    the same new ids), and the prune deletes whatever a killed run left unreachable."""
    import time

    from memd import history
    from memd.memfolder.folder import file_map
    from memd.store import atomic_write, current_signature, fault

    live = file_map(project.memory_dir) if project.memory_dir.is_dir() else {}
    new_live: dict[str, bytes] = {}
    for rel, data in sorted(live.items()):
        new, n = _bytes(data, find)
        if n:
            if is_team(rel):
                res.skipped.append((rel, "in team/ (synced from a server; memd never writes it)"))
                continue
            res.files[rel] = n
            new_live[rel] = new
    entries = history.log(state_dir, project.name, limit=1_000_000)
    broken = next((e for e in entries if e.kind == history.DAMAGED), None)
    if broken is not None:  # every commit is rewritten: a damaged one cannot be, nor be left holding it
        raise history.HistoryError(
            f"the history of {project.name} is damaged at commit {broken.commit[:10]}: forget cannot rewrite "
            f"what it cannot read; nothing was changed; move {history.repo_dir(state_dir, project.name)} "
            "aside (it may hold the text: delete it once you are sure) and run forget again",
            path=str(history.repo_dir(state_dir, project.name)))
    res.commits_total = len(entries)
    res.commits = _commits_with(state_dir, project.name, find)
    from memd.sync import evidence

    res.evidence = evidence.scrub(state_dir, project.name, lambda t: forgotten(t, find), apply=apply)
    if not apply:
        return
    if new_live:
        res.run = f"forget-{time.strftime('%Y%m%dT%H%M%S', time.localtime(now))}"
        before = history.snapshot_before(state_dir, project.name, project.memory_dir, "forget", run=res.run)
        done: dict[str, bytes | None] = {}
        for rel, data in new_live.items():
            path = project.memory_dir / rel
            try:
                expect = current_signature(path)
                if path.read_bytes() != live[rel]:
                    res.skipped.append((rel, "changed since it was read; run forget again"))
                    continue
                atomic_write(path, data, expect=expect)
                done[rel] = data
            except OSError as e:
                res.skipped.append((rel, f"not written: {e.strerror or e}"))
        history.record_after(state_dir, project.name, before, done, "forget", res.run,
                             f"forget: {sum(res.files.values())} match(es) in {len(done)} file(s)")
        fault("forget.after_live", project.name)
    res.commits, res.pruned, res.left = _rewrite_history(state_dir, project.name, find)
    if res.commits:
        _record_rewrite(state_dir, project.name, res, why, find)


# --------------------------------------------------------------------------- a forget a kill interrupted

def _pending_path(state_dir: Path) -> Path:
    return state_dir / "forget" / "pending.json"


def pending(state_dir: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """The forgets that started and have not finished (a kill, a power cut): project -> id -> {record,
    started, why}. The record is what ``memd.core.forgetting`` tells other machines: a literal as a salted
    hash and its length, never the text (the history beside it may still hold the text until the forget
    is finished; this file never adds a copy)."""
    from memd.store import read_json_dict

    out: dict[str, dict[str, dict[str, Any]]] = {}
    for project, rows in read_json_dict(_pending_path(state_dir)).items():
        if isinstance(rows, dict):
            good = {str(k): v for k, v in rows.items() if isinstance(v, dict) and isinstance(v.get("record"), dict)}
            if good:
                out[str(project)] = good
    return out


def _journal(state_dir: Path, project: str, rid: str, entry: dict[str, Any] | None) -> None:
    import contextlib
    import json

    from memd.store import atomic_write

    data: dict[str, Any] = dict(pending(state_dir))
    rows = dict(data.get(project, {}))
    if entry is None:
        rows.pop(rid, None)
    else:
        rows[rid] = entry
    if rows:
        data[project] = rows
    else:
        data.pop(project, None)
    path = _pending_path(state_dir)
    if not data:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write(path, json.dumps(data, indent=1, sort_keys=True) + "\n", mode=0o600)


def _record_of(entry: dict[str, Any]) -> forgetting.Record | None:
    fields = forgetting.Record.__dataclass_fields__
    try:
        return forgetting.Record(**{k: v for k, v in entry.get("record", {}).items() if k in fields})
    except TypeError:
        return None


def _describe(entry: dict[str, Any]) -> str:
    import time

    rec = _record_of(entry)
    what = rec.describe() if rec is not None else "something"
    started = entry.get("started")
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(started)) if isinstance(started, (int, float)) else "?"
    return f"a forget of {what} started {when}"


def _resume_find(entry: dict[str, Any], project: Project, state_dir: Path) -> Matcher | None:
    """How to find again what an interrupted forget was taking out: the secret rules, the pattern, or the
    literal whose salted hash the record holds, looked for in the live files and in every object of the
    history (the unreachable ones a killed prune left too); None when it is nowhere any more."""
    rec = _record_of(entry)
    if rec is None:
        return None
    if rec.kind == "secrets":
        return matcher(secrets=True)
    if rec.kind == "pattern":
        try:
            return matcher(pattern=rec.pattern)
        except UsageError:
            return None

    def sources() -> Iterator[bytes]:
        from memd.memfolder.folder import file_map

        if project.memory_dir.is_dir():
            yield from file_map(project.memory_dir).values()
        repo = _repo(state_dir, project.name)
        if repo is None:
            return
        try:
            yield from (data for data in _object_texts(repo) if data)
        finally:
            repo.close()

    found = forgetting.find_literal(rec, sources())
    if found is None:
        return None
    try:
        return matcher(string=found.decode("utf-8"))
    except (UnicodeDecodeError, UsageError):
        return None


def _object_texts(repo: Any) -> Iterator[bytes]:
    from dulwich.objects import Blob, Commit

    for sha in list(repo.object_store):
        obj = repo[sha]
        yield obj.message if isinstance(obj, Commit) else obj.data if isinstance(obj, Blob) else b""


def _make_whole(project: Project, state_dir: Path) -> None:
    """What a killed writer left (the project lock is held): dulwich's lock files in the history, memd's
    temp files in the memory folder."""
    from memd import history
    from memd.store import sweep_temps

    repo = history.open_to_rewrite(state_dir, project.name)
    if repo is not None:
        repo.close()
    if project.memory_dir.is_dir():
        sweep_temps(project.memory_dir)


def pending_lines(state_dir: Path, projects: Iterable[str] | None = None) -> str:
    """``memd status``'s lines: a forget a kill interrupted, and the command that finishes it."""
    want = None if projects is None else set(projects)
    out = []
    for project, rows in sorted(pending(state_dir).items()):
        if want is not None and project not in want:
            continue
        for entry in rows.values():
            out.append(f"forget: {project}: incomplete: {_describe(entry)} did not finish (killed?); its memory "
                       f"files or history may still hold it; `memd forget {project} --finish` (or any forget of "
                       "it) finishes it")
    return "".join(line + "\n" for line in out)


def _record_rewrite(state_dir: Path, project: str, res: ForgetResult, why: str, find: Matcher) -> None:
    """The rewrite itself, as a commit on the rewritten history (the files of its tip, unchanged): ``memd
    history`` shows when the history was rewritten and how much, never what was taken out."""
    from memd import history

    tip = history.log(state_dir, project, limit=1)
    if not tip:
        return
    files = history.files_at(state_dir, project, tip[0].commit)
    summary = (f"forget: {res.commits} of {res.commits_total} history commit(s) rewritten, {res.pruned} old "
               f"object(s) deleted" + (f" ({why})" if why else ""))
    history.commit_files(state_dir, project, files, forgotten(summary, find)[0], kind="rewrite", job="forget",
                         run=res.run)


def _commits_with(state_dir: Path, project: str, find: Matcher) -> int:
    repo = _repo(state_dir, project)
    if repo is None:
        return 0
    try:
        seen: dict[bytes, bool] = {}  # blob id -> holds a match (a file unchanged between commits is one blob)
        return sum(1 for c in _walk(repo) if _holds(repo, c, find, seen))
    finally:
        repo.close()


def _repo(state_dir: Path, project: str) -> Any:
    from dulwich.repo import Repo

    from memd import history

    path = history.repo_dir(state_dir, project)
    if not (path / "HEAD").exists():
        return None
    return Repo(str(path))


def _walk(repo: Any) -> list[Any]:
    """The branch's commits, oldest first (first parents: memd's history is a line)."""
    from memd.history import BRANCH

    try:
        cur = repo.refs[BRANCH]
    except KeyError:
        return []
    out = []
    while cur is not None:
        c = repo[cur]
        out.append(c)
        cur = c.parents[0] if c.parents else None
    return out[::-1]


def _holds(repo: Any, commit: Any, find: Matcher, seen: dict[bytes, bool]) -> bool:
    if _bytes(commit.message, find)[1]:
        return True
    for sha in _blobs(repo, commit.tree):
        if sha not in seen:
            seen[sha] = bool(_bytes(repo[sha].data, find)[1])
        if seen[sha]:
            return True
    return False


def _blobs(repo: Any, tree_id: bytes) -> list[bytes]:
    import stat

    out: list[bytes] = []
    for entry in repo[tree_id].items():
        if stat.S_ISDIR(entry.mode):
            out.extend(_blobs(repo, entry.sha))
        else:
            out.append(entry.sha)
    return out


def rewrite_commits(repo: Any, tips: list[bytes], find: Matcher) -> tuple[dict[bytes, bytes], int]:
    """Every commit reachable from ``tips`` written anew with the matches taken out of its files (every
    blob of its tree) and its message, parents first: (old id -> new id for each of them, how many held a
    match). Nothing else of a commit changes (author, times, trailers), so a rewrite is deterministic:
    the same commits rewritten the same way on two machines get the same ids. No ref is moved here."""
    import stat

    from dulwich.objects import Blob, Commit, Tree

    trees: dict[bytes, bytes] = {}

    def clean_tree(tree_id: bytes) -> bytes:
        if tree_id in trees:
            return trees[tree_id]
        old = repo[tree_id]
        new = Tree()
        for entry in old.items():
            sha = entry.sha
            if stat.S_ISDIR(entry.mode):
                sha = clean_tree(sha)
            elif entry.mode != 0o160000:  # a submodule link names a commit elsewhere: no blob
                data, n = _bytes(repo[sha].data, find)
                if n:
                    blob = Blob.from_string(data)
                    repo.object_store.add_object(blob)
                    sha = blob.id
            new.add(entry.path, entry.mode, sha)
        if new.id != old.id:
            repo.object_store.add_object(new)
        trees[tree_id] = bytes(new.id)
        return trees[tree_id]

    mapped: dict[bytes, bytes] = {}
    changed = 0
    for c in _topological(repo, tips):
        tree = clean_tree(c.tree)
        message, n = _bytes(c.message, find)
        parents = [mapped.get(p, p) for p in c.parents]
        if tree == c.tree and not n and parents == list(c.parents):
            mapped[c.id] = c.id
            continue
        changed += tree != c.tree or bool(n)
        new = Commit()
        new.tree, new.parents, new.message = tree, parents, message
        new.author, new.committer = c.author, c.committer
        new.author_time, new.commit_time = c.author_time, c.commit_time
        new.author_timezone, new.commit_timezone = c.author_timezone, c.commit_timezone
        new.encoding = c.encoding
        repo.object_store.add_object(new)
        mapped[c.id] = new.id
    return mapped, changed


def _topological(repo: Any, tips: list[bytes]) -> list[Any]:
    """The commits reachable from tips, every parent before its children (no recursion: a long line)."""
    out: list[Any] = []
    done: set[bytes] = set()
    for tip in tips:
        stack: list[tuple[bytes, bool]] = [(tip, False)]
        while stack:
            sha, expanded = stack.pop()
            if sha in done:
                continue
            c = repo[sha]
            if expanded:
                done.add(sha)
                out.append(c)
                continue
            stack.append((sha, True))
            stack.extend((p, False) for p in c.parents if p not in done)
    return out


def count_holding(repo: Any, tips: list[bytes], find: Matcher) -> tuple[int, int]:
    """(commits reachable from tips that hold a match, commits reachable)."""
    seen: dict[bytes, bool] = {}
    commits = _topological(repo, tips)
    return sum(1 for c in commits if _holds(repo, c, find, seen)), len(commits)


def prune(repo: Any) -> int:
    """Delete every object no ref reaches, now (dulwich's garbage collector, no grace period: what is
    unreachable after a rewrite holds what is being forgotten); how many were deleted."""
    from dulwich.gc import garbage_collect

    count = len(list(repo.object_store))
    garbage_collect(repo, prune=True, grace_period=0)
    return max(0, count - len(list(repo.object_store)))


def objects_holding(repo: Any, find: Matcher) -> int:
    """How many objects of the repository still hold a match (blobs and commit messages; read back)."""
    from dulwich.objects import Blob, Commit

    left = 0
    for sha in list(repo.object_store):
        obj = repo[sha]
        data = obj.message if isinstance(obj, Commit) else obj.data if isinstance(obj, Blob) else b""
        if data and _bytes(data, find)[1]:
            left += 1
    return left


def _rewrite_history(state_dir: Path, project: str, find: Matcher) -> tuple[int, int, int]:
    """Rewrite every commit of the branch with the matches taken out; (commits changed, objects pruned,
    objects still holding a match)."""
    from memd import history
    from memd.history import BRANCH
    from memd.store import fault

    repo = history.open_to_rewrite(state_dir, project)
    if repo is None:
        return 0, 0, 0
    try:
        try:
            tip = repo.refs[BRANCH]
        except KeyError:
            return 0, 0, 0
        mapped, changed = rewrite_commits(repo, [tip], find)
        fault("forget.after_objects", project)
        if mapped[tip] != tip and not repo.refs.set_if_equals(BRANCH, tip, mapped[tip]):
            raise UsageError("the history moved while it was being rewritten; run forget again")
        fault("forget.after_ref", project)
        pruned = prune(repo)
        return changed, pruned, objects_holding(repo, find)
    finally:
        repo.close()
