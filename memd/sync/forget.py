"""`memd forget` across machines: the sync remote's branch rewritten, and a record the others honour.

This machine (``memd forget PROJECT ... --apply`` with sync on; ``forget_remote``):

1. one fetch, then every commit of the project's branch (``memory/<identity>``) as fetched, and of this
   machine's own refs for it (what it last shared, what it last made), is rewritten with the matches
   replaced by ``[forgotten]`` (``memd.forget.rewrite_commits``: dulwich objects written anew);
2. one commit goes on top, with the tree of the rewritten tip and a record in its message
   (``memd.core.forgetting``: a salted hash and length of a literal, the pattern, or "the secret rules",
   never the thing itself; and the commits it rewrote, old id to new);
3. it is pushed with a lease (``git push --force-with-lease=<branch>:<the head fetched>``): a remote that
   moved since the fetch (another machine pushed) refuses it and nothing changes there; the command
   says so and the user runs it again;
4. pushed, the refs here move to it and the objects no ref reaches any more are deleted (dulwich's
   garbage collector), then every object left in the sync repository is read back and checked.

Another machine, at its next sync (``honour``, called by the sync job before each project's round):
the branch's commits it has not seen carry a record it has not applied (the branch was rewritten, so it
walks all of it). For each: it finds the thing in its own live files, history and sync repository
(literal: the window of that length whose salted hash matches; pattern: the pattern; secrets: its own
rules), takes it out of the live files and rewrites its history (``memd.forget.forget_project``, which
records the run), moves its shared base to the rewritten commit (the record's map), deletes the old
commits from its sync repository, and remembers the record (``state_dir/sync/forgotten.json``). The
old commits are never pushed again: nothing points at them, and a push only sends what its commit
reaches. A live file it could not clean (written meanwhile, unwritable, team/), and any file written
later that holds the forgotten thing again, never goes out: the push keeps the remote's version of it
(``withhold``) and ``memd status`` says which file and why (``status_lines``).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memd.core import forgetting
from memd.errors import UsageError
from memd.sync import gitremote

if TYPE_CHECKING:
    from memd.config import Config
    from memd.forget import Matcher
    from memd.jobs import JobContext
    from memd.layout import Project


# --------------------------------------------------------------------------- what was forgotten where


@dataclass(frozen=True)
class What:
    """What the user asked to forget, as the command got it (kept in memory only, never written)."""

    kind: str  # literal, pattern, secrets
    value: str = ""

    def matcher(self) -> Matcher:
        from memd.forget import matcher

        if self.kind == "literal":
            return matcher(string=self.value)
        if self.kind == "pattern":
            return matcher(pattern=self.value)
        return matcher(secrets=True)

    def record(self, machine: str, now: float) -> forgetting.Record:
        rid, when = os.urandom(8).hex(), time.strftime("%Y-%m-%d", time.gmtime(now))
        if self.kind == "literal":
            return forgetting.literal(self.value, id=rid, salt=os.urandom(16), machine=machine, when=when)
        if self.kind == "pattern":
            return forgetting.pattern(self.value, id=rid, machine=machine, when=when)
        return forgetting.secrets(id=rid, machine=machine, when=when)

    def same(self, rec: forgetting.Record) -> bool:
        """The record stands for this very thing (a second forget of it need not tell anyone again)."""
        if rec.kind != self.kind:
            return False
        if self.kind == "literal":
            data = self.value.encode("utf-8")
            return len(data) == rec.length and forgetting.holds_literal(rec, data)
        return self.kind == "secrets" or rec.pattern == self.value


def _state_path(state_dir: Path) -> Path:
    return state_dir / "sync" / "forgotten.json"


def _load_all(state_dir: Path) -> dict[str, Any]:
    from memd.store import read_json_dict

    return read_json_dict(_state_path(state_dir))


def _save_all(state_dir: Path, data: dict[str, Any]) -> None:
    from memd.store import atomic_write

    atomic_write(_state_path(state_dir), json.dumps(data, indent=1, sort_keys=True) + "\n", mode=0o600)


def _row(data: dict[str, Any], project: str) -> dict[str, Any]:
    row = data.get(project)
    if not isinstance(row, dict):
        row = data[project] = {}
    if not isinstance(row.get("applied"), list):
        row["applied"] = []
    if not isinstance(row.get("held"), dict):
        row["held"] = {}
    return row


def applied(state_dir: Path, project: str) -> list[forgetting.Record]:
    """The records this machine applied (or wrote) for a project, oldest first."""
    out = []
    for d in _row(_load_all(state_dir), project)["applied"]:
        if not isinstance(d, dict):
            continue
        try:
            out.append(forgetting.Record(**{k: v for k, v in d.items() if k in forgetting.Record.__dataclass_fields__}))
        except TypeError:
            continue
    return out


def note_applied(state_dir: Path, project: str, rec: forgetting.Record) -> None:
    data = _load_all(state_dir)
    row = _row(data, project)
    if all(isinstance(d, dict) and d.get("id") != rec.id for d in row["applied"]):
        row["applied"].append(rec.as_dict())
    _save_all(state_dir, data)


def held(state_dir: Path, project: str) -> dict[str, str]:
    return {str(k): str(v) for k, v in _row(_load_all(state_dir), project)["held"].items()}


def set_held(state_dir: Path, project: str, files: dict[str, str]) -> None:
    data = _load_all(state_dir)
    row = _row(data, project)
    row["held"] = dict(files)
    _save_all(state_dir, data)


def held_files(state_dir: Path) -> dict[str, dict[str, str]]:
    """Per project, the files sync holds back because they hold something forgotten (path -> why)."""
    out: dict[str, dict[str, str]] = {}
    for project, row in sorted(_load_all(state_dir).items()):
        files = row.get("held") if isinstance(row, dict) else None
        if isinstance(files, dict) and files:
            out[project] = {str(rel): str(why) for rel, why in sorted(files.items())}
    return out


def status_lines(state_dir: Path) -> str:
    """``memd status``'s lines: a file sync holds back because it holds something forgotten."""
    out = []
    for project, files in held_files(state_dir).items():
        shown = "; ".join(f"{rel}: {why}" for rel, why in sorted(files.items())[:3])
        more = f" and {len(files) - 3} more" if len(files) > 3 else ""
        out.append(f"sync: {project}: {len(files)} file(s) hold what `memd forget` took out and are not sent "
                   f"({shown}{more}); resolve: take it out of the file (or `memd forget {project} ... --apply` "
                   "here), the next sync sends it")
    return "".join(line + "\n" for line in out)


# --------------------------------------------------------------------------- the outgoing guard


def guard(state_dir: Path, project: str) -> Callable[[bytes], str | None]:
    """Why a file must not go out (None: it may): it holds what a record applied here forgot. The secret
    rules' own findings are withheld by the sync job already (``stays_here``)."""
    recs = [r for r in applied(state_dir, project) if r.kind in ("literal", "pattern")]
    rxs: list[tuple[forgetting.Record, re.Pattern[str]]] = []
    for r in recs:
        if r.kind == "pattern":
            try:
                rxs.append((r, re.compile(r.pattern)))
            except re.error:
                continue

    def why(data: bytes) -> str | None:
        for r in recs:
            if r.kind == "literal" and forgetting.holds_literal(r, data):
                return f"it holds {r.describe()} forgotten on {r.machine or 'another machine'} ({r.when})"
        text = data.decode("utf-8", "replace")
        for r, rx in rxs:
            if any(m.end() > m.start() for m in rx.finditer(text)):
                return f"it holds {r.describe()}, forgotten on {r.machine or 'another machine'} ({r.when})"
        return None

    return why


def _version(data: bytes | None) -> str:
    import hashlib

    return "" if data is None else hashlib.sha256(data).hexdigest()[:32]


def left(state_dir: Path, project: str) -> dict[str, dict[str, str]]:
    """Files a record could not be applied to here (rel -> reason, and the version they were held at)."""
    rows = _row(_load_all(state_dir), project).get("left")
    return {str(k): v for k, v in rows.items() if isinstance(v, dict)} if isinstance(rows, dict) else {}


def keep_left(state_dir: Path, project: str, files: dict[str, tuple[str, bytes | None]]) -> None:
    """Hold files a record could not be applied to (rel -> (reason, their bytes now)) until they change."""
    data = _load_all(state_dir)
    row = _row(data, project)
    rows = row.get("left")
    if not isinstance(rows, dict):
        rows = {}
    rows.update({rel: {"reason": why, "version": _version(b)} for rel, (why, b) in files.items()})
    row["left"] = rows
    row["held"] = {**row["held"], **{rel: why for rel, (why, _b) in files.items()}}
    _save_all(state_dir, data)


def withhold(state_dir: Path, project: str, files: dict[str, bytes], remote: dict[str, bytes]) -> dict[str, str]:
    """Of this machine's files about to go out, those that must not (rel -> why), remembered for ``memd
    status`` (and forgotten once none must): a file that holds something a record applied here forgot,
    and a file a record could not be applied to, while it is as it was then. A file as the remote has it
    is never judged."""
    if not applied(state_dir, project):
        return {}
    why = guard(state_dir, project)
    was_left = left(state_dir, project)
    still_left = {rel: row for rel, row in was_left.items()
                  if rel in files and _version(files[rel]) == row.get("version")}
    out = {rel: str(row.get("reason", "")) for rel, row in still_left.items() if remote.get(rel) != files[rel]}
    for rel, data in files.items():
        if rel in out or remote.get(rel) == data:
            continue
        reason = why(data)
        if reason is not None:
            out[rel] = reason
    if out != held(state_dir, project) or still_left != was_left:
        all_ = _load_all(state_dir)
        row = _row(all_, project)
        row["held"], row["left"] = out, still_left
        _save_all(state_dir, all_)
    return out


# --------------------------------------------------------------------------- this machine forgets


@dataclass
class RemoteResult:
    status: str  # off, unsynced, failed, refused, nothing, proposed, changed
    message: str
    branch: str = ""
    commits: int = 0  # commits of the remote's branch holding it
    total: int = 0
    pruned: int = 0
    left: int = 0  # objects of the sync repository still holding it after the rewrite (must be 0)
    record: str = ""  # the forget commit pushed


def forget_remote(project: Project, config: Config, state_dir: Path, what: What, *, apply: bool,
                  interactive: bool = False, now: float | None = None,
                  before_push: Callable[[], Any] | None = None) -> RemoteResult:
    """The sync side of ``memd forget`` for one project (see the module doc). ``before_push`` runs right
    before the push (tests: another machine pushing at that moment)."""
    from memd.forget import count_holding, objects_holding, prune, rewrite_commits
    from memd.state import StateStore
    from memd.sync.gitremote import machine_name
    from memd.sync.identity import identify

    remote = config.sync.remote.strip()
    if not remote:
        return RemoteResult("off", "")
    with StateStore.open(state_dir) as state:
        ident = identify(project, config, state)
    if ident.branch is None:
        return RemoteResult("unsynced", f"not synced ({ident.source}): nothing on the remote to rewrite")
    branch = ident.branch
    find = what.matcher()
    try:
        gitremote.fetch(state_dir, remote, timeout=config.sync.timeout_s, interactive=interactive)
    except gitremote.SyncError as e:
        return RemoteResult("failed", f"{e}; the remote is untouched, run it again", branch)
    repo = gitremote.open_repo(state_dir)
    try:
        h = gitremote.heads(repo, branch)
        oid = gitremote._oid
        res = RemoteResult("nothing", "", branch)
        if h.remote is not None:
            res.commits, res.total = count_holding(repo, [oid(h.remote)], find)
        local = [oid(c) for c in (h.shared, h.mine) if c is not None]
        here = count_holding(repo, local, find)[0] if local else 0
        recs = _records(repo, h.remote, None)
        told = any(what.same(r) for _c, r in recs)
        if h.remote is None:
            res.message = f"{branch} is not on the remote yet: nothing there to rewrite"
        elif not res.commits and told and not here:
            res.message = (f"none of the {res.total} commit(s) of {branch} holds it, and the record telling the "
                           "other machines is there already")
        if not apply:
            if h.remote is not None and (res.commits or not told):
                res.status = "proposed"
                res.message = (f"{res.commits} of {res.total} commit(s) of {branch} hold it; would be rewritten "
                               "and force-pushed, with a record telling your other machines to forget it at their "
                               "next sync (never the thing itself)" if res.commits else
                               f"none of the {res.total} commit(s) of {branch} holds it; a record would be pushed "
                               "telling your other machines to forget it at their next sync")
            return res
        if h.remote is None or (not res.commits and told):
            if here:  # only this machine's refs hold it: they are rewritten, nothing is pushed
                _move_local(repo, branch, h, rewrite_commits(repo, local, find)[0])
                res.pruned = prune(repo)
            res.left = objects_holding(repo, find)
            return res
        mapped, _ = rewrite_commits(repo, [oid(h.remote), *local], find)
        new_tip = mapped[oid(h.remote)].decode("ascii")
        machine = machine_name(config.sync.machine)
        rec = what.record(machine, time.time() if now is None else now)
        changed = {k.decode("ascii"): v.decode("ascii") for k, v in mapped.items() if k != v}
        top = _record_commit(repo, new_tip, rec, changed, machine, res.commits, now)
        if before_push is not None:
            before_push()
        try:
            push_with_lease(state_dir, remote, top, branch, h.remote, timeout=config.sync.timeout_s,
                            interactive=interactive)
        except gitremote.SyncError as e:
            prune(repo)  # the rewritten commits nothing points at (they hold nothing to forget)
            if e.kind == "rejected":
                res.status = "refused"
                res.message = (f"the remote's {branch} moved since it was fetched (another machine pushed to it); "
                               "nothing was pushed, the remote is as it was: run the same `memd forget ... --apply` "
                               "again")
            else:
                res.status = "failed"
                res.message = f"{e}; nothing was pushed, run it again"
            return res
        repo.refs[(gitremote._REMOTE + branch).encode()] = top.encode("ascii")
        # what this machine shared and made, rewritten: never the new head, whose files it has not merged
        # (a machine that never synced the project shares nothing yet)
        _move_local(repo, branch, h, mapped)
        note_applied(state_dir, project.name, rec)
        res.pruned = prune(repo)
        res.left = objects_holding(repo, find)
        res.record, res.status = top, "changed"
        res.message = (f"{res.commits} of {res.total} commit(s) of {branch} rewritten and force-pushed, with a "
                       f"record ({rec.describe()}) telling your other machines to forget it at their next sync"
                       if res.commits else
                       f"none of the {res.total} commit(s) of {branch} held it; a record ({rec.describe()}) was "
                       "pushed telling your other machines to forget it at their next sync")
        return res
    finally:
        repo.close()


def _move_local(repo: Any, branch: str, h: gitremote.Heads, mapped: dict[bytes, bytes]) -> None:
    def m(c: str | None) -> str | None:
        return None if c is None else mapped.get(c.encode("ascii"), c.encode("ascii")).decode("ascii")

    gitremote.remember(repo, branch, shared=m(h.shared), mine=m(h.mine))


def _record_commit(repo: Any, parent: str, rec: forgetting.Record, changed: dict[str, str], machine: str,
                   commits: int, now: float | None) -> str:
    from dulwich.objects import Commit

    c = Commit()
    c.tree = repo[parent.encode("ascii")].tree
    c.parents = [gitremote._oid(parent)]
    who = re.sub(r"[^A-Za-z0-9._-]+", "-", machine) or "machine"
    c.author = c.committer = f"memd on {machine} <memd@{who}>".encode()
    t = int(time.time() if now is None else now)
    c.author_time = c.commit_time = t
    c.author_timezone = c.commit_timezone = 0
    c.encoding = b"UTF-8"
    lines = [f"memd forget on {machine}: {rec.describe()}, taken out of {commits} commit(s) of this branch", "",
             f"memd-machine: {machine}", "memd-kind: forget", rec.line(), *forgetting.map_lines(changed)]
    c.message = ("\n".join(lines) + "\n").encode("utf-8")
    repo.object_store.add_object(c)
    return str(c.id.decode("ascii"))


def push_with_lease(state_dir: Path, remote: str, commit: str, branch: str, expect: str, *, timeout: float,
                    interactive: bool = False) -> None:
    """Push commit as the branch's new head only while the remote's head is still ``expect`` (the one
    fetched): a forced push with a lease. A remote that moved refuses it (SyncError kind rejected)."""
    ref = f"refs/heads/{branch}"
    r = gitremote.git(state_dir, ["push", "--porcelain", "--no-verify", f"--force-with-lease={ref}:{expect}",
                                  remote, f"{commit}:{ref}"], timeout=timeout, interactive=interactive)
    if r.code != 0 or "[rejected]" in r.out or "[remote rejected]" in r.out:
        if "stale info" in r.out + r.err:
            raise gitremote.SyncError(f"push to {remote}: the remote moved since it was fetched", kind="rejected")
        raise gitremote._failure("push to", r, remote)


# --------------------------------------------------------------------------- another machine honours it


def _records(repo: Any, head: str | None, stop: str | None) -> list[tuple[str, forgetting.Record]]:
    """The records on the branch from ``head`` back to ``stop`` (excluded; None: its root), oldest first."""
    out: list[tuple[str, forgetting.Record]] = []
    cur = head
    while cur is not None and cur != stop:
        c = repo[cur.encode("ascii")]
        recs, _bad = forgetting.records_in(c.message.decode("utf-8", "replace"))
        out.extend((cur, r) for r in reversed(recs))
        cur = c.parents[0].decode("ascii") if c.parents else None
    return out[::-1]


def pending(repo: Any, h: gitremote.Heads, done: set[str], *,
            everything: bool = False) -> list[tuple[str, forgetting.Record]]:
    """The records on the remote's branch this machine has not applied: those since the base it shares
    (all of the branch when it was rewritten, or with ``everything``: a folder that is not the one that
    shared that base)."""
    if h.remote is None:
        return []
    stop = h.shared if (not everything and h.shared is not None and gitremote.descends(repo, h.shared, h.remote)) \
        else None
    return [(c, r) for c, r in _records(repo, h.remote, stop) if r.id not in done]


def _blobs(repo: Any, tips: list[bytes]) -> Iterator[bytes]:
    """Every blob (and commit message) reachable from tips, each once."""
    import stat

    from memd.forget import _topological

    seen: set[bytes] = set()

    def tree(tid: bytes) -> Iterator[bytes]:
        if tid in seen:
            return
        seen.add(tid)
        for e in repo[tid].items():
            if stat.S_ISDIR(e.mode):
                yield from tree(e.sha)
            elif e.mode != 0o160000 and e.sha not in seen:
                seen.add(e.sha)
                yield bytes(repo[e.sha].data)

    for c in _topological(repo, tips):
        yield bytes(c.message)
        yield from tree(c.tree)


def _finder(rec: forgetting.Record, sources: Callable[[], Iterable[bytes]]) -> tuple[Matcher | None, str]:
    """How to find what a record forgot here, or None and why not (then the files the rewrite changed
    that are here as they were are held: ``honour``)."""
    from memd.forget import matcher

    if rec.kind == "secrets":
        return matcher(secrets=True), ""
    if rec.kind == "pattern":
        try:
            return matcher(pattern=rec.pattern), ""
        except UsageError as e:
            return None, f"its pattern is not one this machine can use ({e})"
    found = forgetting.find_literal(rec, sources())
    if found is None:
        return None, "this machine found it nowhere"
    try:
        return matcher(string=found.decode("utf-8")), ""
    except (UnicodeDecodeError, UsageError):
        return None, "what matches its hash here is not text"


@dataclass
class Honoured:
    notes: list[str] = field(default_factory=list)
    dry: bool = False


def honour(jc: JobContext, project: Project, branch: str) -> Honoured | None:
    """Apply the forget records the remote's branch carries and this machine has not (see the module doc);
    None when there are none. A dry run says what it would do and changes nothing."""
    from memd import history
    from memd.forget import _repo as history_repo
    from memd.forget import forget_project, objects_holding, prune
    from memd.memfolder.folder import file_map

    state_dir = jc.state_dir
    repo = gitremote.open_repo(state_dir)
    try:
        h = gitremote.heads(repo, branch)
        # a folder that did not share the base this machine shares (another memory folder of this machine did:
        # the second clone made the writer) applied none of the records before it: the whole branch is
        # walked, else what the other folder forgot would go out again from this one's files (issue 21 #1)
        seen = gitremote.seen(state_dir).get(project.name)
        newcomer = not (isinstance(seen, dict) and seen.get("branch") == branch and seen.get("remote") == h.shared)
        todo = pending(repo, h, {r.id for r in applied(state_dir, project.name)}, everything=newcomer)
        if not todo:
            return None
        out = Honoured(dry=jc.dry_run)
        if jc.dry_run:
            for _c, rec in todo:
                out.notes.append(f"{rec.machine or 'another machine'} forgot {rec.describe()} on {rec.when}: this "
                                 "sync would take it out of the files and history here, then take the rewritten branch")
            return out
        oid = gitremote._oid
        old = [oid(c) for c in (h.shared, h.mine) if c is not None]
        max_bytes = jc.config.budget.max_file_bytes
        old_base = gitremote.files_of(repo, h.shared, max_bytes).files if h.shared else {}
        base = h.shared
        held_now: dict[str, str] = {}
        whom: list[str] = []
        finds: list[Matcher] = []
        for commit, rec in todo:
            def sources() -> Iterator[bytes]:
                if project.memory_dir.is_dir():
                    yield from file_map(project.memory_dir).values()
                hr = history_repo(state_dir, project.name)
                if hr is not None:
                    try:
                        # dulwich's refs have no .get (ruff's SIM401 suggests one): look up, KeyError when none
                        try:
                            tip = hr.refs[history.BRANCH]
                        except KeyError:
                            tip = None
                        if tip is not None:
                            yield from _blobs(hr, [tip])
                    finally:
                        hr.close()
                yield from _blobs(repo, old)

            find, why_not = _finder(rec, sources)
            who = rec.machine or "another machine"
            whom.append(f"{who} ({rec.when})")
            if find is None:
                out.notes.append(f"{who} forgot {rec.describe()} on {rec.when}: {why_not}")
            else:
                finds.append(find)
                res = forget_project(project, jc.config, state_dir, find, apply=True, record=rec,
                                     why=f"{rec.describe()}, forgotten on {who} ({rec.when})")
                bits = [f"{sum(res.files.values())} match(es) in {len(res.files)} file(s)" if res.files else "",
                        f"{res.commits} history commit(s) rewritten" if res.commits else ""]
                found = ", ".join(b for b in bits if b)
                out.notes.append(f"{who} forgot {rec.describe()} on {rec.when}: "
                                 + (f"taken out here too ({found})" if found else "this machine found it nowhere"))
                for rel, why in res.skipped:
                    held_now[rel] = f"it still holds {rec.describe()} forgotten on {who} ({why})"
                    out.notes.append(f"left {rel}: {why}")
                if res.left:
                    out.notes.append(f"error: {res.left} object(s) of the history still hold it")
            base = _mapped(base, forgetting.map_in(repo[commit.encode("ascii")].message.decode("utf-8", "replace")))
            (jc.log or _silent).warning("sync.forgot", project=project.name, machine=who, kind=rec.kind,
                                        record=rec.id, found=find is not None)
            note_applied(state_dir, project.name, rec)
        if base is not None and not gitremote.descends(repo, base, h.remote or ""):
            base = None  # the record's map did not reach it: merged with no common base (nothing lost)
        for ref in (gitremote._SHARED, gitremote._MINE):
            gitremote._set(repo, ref + branch, base)
        last = gitremote.seen(state_dir).get(project.name)
        if isinstance(last, dict) and last.get("branch") == branch and last.get("remote") == h.shared:
            # what this folder last synced is the rewritten branch now (else the next merge would find the
            # folder's last sync unlike the branch's shared head and merge with no common base: a conflict
            # block holding the very text the forget took out, sent back)
            gitremote.mark_seen(state_dir, project.name, branch, base, last.get("folder"), last.get("dir"),
                                last.get("files"))
        prune(repo)
        left = sum(objects_holding(repo, f) for f in finds)
        if left:
            out.notes.append(f"error: {left} object(s) of the sync repository still hold it (another project's "
                             "branch holds it too: forget it there)")
        # a file the forget rewrote that is here as it was before (memd could not find in it what was
        # forgotten: other rules, a file it could not write) must not go out as a change: held until it changes
        live = file_map(project.memory_dir, max_bytes) if project.memory_dir.is_dir() else {}
        if base is not None:
            new_base = gitremote.files_of(repo, base, max_bytes).files
            for rel, data in old_base.items():
                if new_base.get(rel) != data and live.get(rel) == data and rel not in held_now:
                    held_now[rel] = (f"it is as it was before the forget on {', '.join(whom)} rewrote it, and memd "
                                     "could not find here what was taken out of it")
        for rel, why in sorted(held_now.items()):
            out.notes.append(f"{rel} held here, never sent: {why}")
        if held_now:
            keep_left(state_dir, project.name, {rel: (why, live.get(rel)) for rel, why in held_now.items()})
        return out
    finally:
        repo.close()


def _mapped(commit: str | None, mapping: dict[str, str]) -> str | None:
    return None if commit is None else mapping.get(commit, commit)


class _Silent:
    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *a, **k: None


_silent: Any = _Silent()
