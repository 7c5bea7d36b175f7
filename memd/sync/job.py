"""The sync job: one fetch, then each project merged as a run like the others, then one push each.

``run_sync(jc, projects)`` (the daemon's worker and ``memd sync`` both call it):

1. One ``git fetch`` of every memory branch of the remote (``memd.sync.gitremote``). Offline, an
   auth failure, a damaged remote: every project ends ``failed`` with the reason; nothing local is
   touched, and the next interval tries again.
2. Per project, through ``memd.jobs.runner.run_job`` (the run log, the events): its identity
   (``memd.sync.identity.identify_all``: per memory folder Claude Code uses, one writer per identity on
   this machine; a second folder of one identity is ``refused`` as held, with a status line); a remote
   branch that does not descend from what we last shared (force-pushed, deleted) is ``refused`` with the
   reason, nothing applied. A folder whose last sync is not what this machine last shared on the branch
   (another local folder synced it) merges with no common base: nothing of the remote's counts as deleted.
3. The merge (``memd.sync.merge``) against the last commit both sides shared, as the edit step of
   ``memd.apply.run``: the folder is staged, the merged files written into the copy, the index
   rebuilt deterministically, the guards run (a remote that would delete or empty too much of the
   folder is ``refused``), the live folder is snapshotted and written file by file without
   clobbering; ``memd undo`` reverts it like any run. A dry run keeps the diff (``proposed``).
   Finding 6, undo is local: the files an undo changed (``held.Held.undone``) keep this machine's version
   and go out as the remote has them, until ``--keep-local`` (the undo merged like any local change) or
   ``--take-remote`` (the undo's change taken back out of this side, ``redone``, then merged).
4. Conflicts (issue 21): the file keeps this machine's text and, after it, a conflict block with the
   other machine's differing lines, its name and the date (``memd.core.conflict``; never inside the
   frontmatter), so both sides' words are in the file on every machine (the other machine takes the
   merged file as an ordinary change); ``memd check`` reports the block (MEM090), ``memd status`` counts
   it. The other side also goes to memd's history (a ``theirs`` commit) and to the dream's evidence
   (``memd.sync.evidence``), with one ``sync.conflict`` event each.
   A refusal holds the files the guard's reasons are about (``culprits``), never the project: the merge
   is tried again with them kept as they are here (``MAX_HOLD_ROUNDS``), the rest is applied and sent,
   and what is held is recorded for ``memd status`` (``memd.sync.held``). A missing memory folder, or one
   removed and made anew since the last sync, is "nothing here yet": merged with no common base.
5. What goes out is the folder as it is now: the index and topic files, never team/, never a file
   in which the secret rules find anything, nor a topic file the other machines' guards would refuse
   (no frontmatter or no memory type; ``stays_here``): the remote keeps its own version of such a file. When
   the remote already holds all of it, nothing is pushed. A push someone else beat is retried after
   a fresh fetch and merge, ``sync.push_attempts`` times at most. Issue 21: a push that would delete or
   shrink more of the remote's memory than the guard's shares is held (``memd.core.guard.loss_reasons``)
   until ``--push-deletions``; a held file goes out as the remote has it; the remote's entries this
   machine cannot read go out untouched; nothing is pushed into a remote that is not memd's
   (``gitremote.whose``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memd.core.paths import INDEX_NAME, is_utf8_name
from memd.errors import MemdError
from memd.jobs import JobContext, ProjectOutcome
from memd.memfolder.folder import file_map
from memd.projlock import ProjectBusyError
from memd.sync import gitremote, held
from memd.sync.identity import Identity, identify_all, load_writers

if TYPE_CHECKING:
    from memd import apply as ap
    from memd import history
    from memd.core import guard as core_guard
    from memd.core import secrets
    from memd.jobs.runner import JobResult
    from memd.layout import Project
    from memd.sync import evidence
    from memd.sync import forget as forgetting
    from memd.sync import merge as mg


class _Lazy:
    """A module imported when first used: a sync with nothing new never needs the merge, the apply pipeline,
    the history or the forget records, and `memd sync` pays for every import (issue 33, speed)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        import importlib

        return getattr(importlib.import_module(self._name), attr)


if not TYPE_CHECKING:
    ap = _Lazy("memd.apply")
    history = _Lazy("memd.history")
    core_guard = _Lazy("memd.core.guard")
    secrets = _Lazy("memd.core.secrets")
    evidence = _Lazy("memd.sync.evidence")
    forgetting = _Lazy("memd.sync.forget")
    mg = _Lazy("memd.sync.merge")

UNTOUCHED = "local memory untouched; the next sync tries again"
MAX_HOLD_ROUNDS = 4  # merges tried, each holding back the files the guard named in the one before


class _Rejected(Exception):
    """The push lost a race: fetch, merge and push again."""


class _Held(Exception):
    """The push would delete or shrink more of the remote's memory than the guard shares allow."""

    def __init__(self, reasons: list[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", "replace")


def stays_here(rel: str, data: bytes) -> str | None:
    """Why a file is not sent (None: it travels): a secret, or a topic file the other machines' guards
    would refuse to add (no frontmatter, frontmatter that does not parse, no memory type)."""
    from memd.core import frontmatter

    if not is_utf8_name(rel):  # a git tree name the other machines could not write back the same
        return "a name that is not UTF-8 (rename the file to send it)"
    text = data.decode("utf-8", "replace")
    if secrets.scan(text):
        return "a secret"
    if rel == INDEX_NAME:
        return None
    tf = frontmatter.parse(text)
    if not tf.has_frontmatter or tf.error:
        return "no frontmatter" if not tf.has_frontmatter else "frontmatter that does not parse"
    return None if tf.type in frontmatter.MEMORY_TYPES else "no memory type"


@dataclass
class Plan:
    """What one round of one project found: the three sides and their merge."""

    base: dict[str, bytes]
    local: dict[str, bytes]
    remote: gitremote.TreeFiles
    merged: mg.FolderMerge
    index: str | None  # the index to rebuild from

    @property
    def local_changes(self) -> bool:
        topics = {k: v for k, v in self.local.items() if k != INDEX_NAME}
        return self.merged.files != topics or self.index != _opt(self.local.get(INDEX_NAME))


def _opt(data: bytes | None) -> str | None:
    return None if data is None else _text(data)


def _split(files: dict[str, bytes]) -> tuple[dict[str, bytes], str | None]:
    return {k: v for k, v in files.items() if k != INDEX_NAME}, _opt(files.get(INDEX_NAME))


Redo = dict[str, list[tuple[bytes | None, bytes | None]]]  # rel -> per undo: (what it wrote, what it reverted)


def plan(base: dict[str, bytes], local: dict[str, bytes], remote: gitremote.TreeFiles,
         hold: frozenset[str] = frozenset(), date: str = "", redo: Redo | None = None) -> Plan:
    """The merge of the three sides; a file in ``hold`` keeps this machine's version (the index too). A
    conflict block names the other machine and ``date`` (the sync's day). ``redo`` (``--take-remote``
    of an undo): the undo's change is taken back out of this machine's side first (``redone``), then
    the three sides merge as ever."""
    local = {k: v for k, v in local.items() if gitremote.synced(k)}
    bt, bi = _split(base)
    lt, li = _split(redone(local, redo, date) if redo else local)
    rt, ri = _split(remote.files)
    merged = mg.merge_folder(bt, lt, rt, machine=remote.machine or "another machine", date=date)
    for rel in hold - {INDEX_NAME}:
        if rel in lt:
            merged.files[rel] = lt[rel]
        else:
            merged.files.pop(rel, None)
        merged.taken = [r for r in merged.taken if r != rel]
        merged.conflicts = [c for c in merged.conflicts if c.rel != rel]
    if INDEX_NAME in hold:
        return Plan(base, local, remote, merged, li)
    index, blocked = mg.merge_index_blocks(bi, li, ri, machine=remote.machine or "another machine", date=date)
    if blocked and index is not None:  # the same index line edited on both machines (issue 33 finding 3)
        merged.conflicts.append(mg.FileMerge(INDEX_NAME, index.encode("utf-8"), "conflict",
                                             remote.files.get(INDEX_NAME), local.get(INDEX_NAME)))
    return Plan(base, local, remote, merged, index)


def redone(local: dict[str, bytes], redo: Redo, date: str) -> dict[str, bytes]:
    """This machine's files with the undos' changes reverted, newest first (each a three-way merge from
    what the undo wrote to what it reverted, over what the file is now): what was written here since,
    and between two undos, stays."""
    out = dict(local)
    for rel, undos in redo.items():
        for wrote, reverted in reversed(undos):
            data: bytes | None
            if rel == INDEX_NAME:
                merged = mg.merge_index(_opt(wrote), _opt(out.get(rel)), _opt(reverted))
                data = None if merged is None else merged.encode("utf-8")
            else:
                data = mg.merge_file(rel, wrote, out.get(rel), reverted, machine="the version before the undo",
                                     date=date).result
            if data is None:
                out.pop(rel, None)
            else:
                out[rel] = data
    return out


def culprits(reasons: tuple[str, ...] | list[str], p: Plan) -> dict[str, str]:
    """The incoming changes the guard's reasons are about (path -> reason): a reason that names a file
    names it; one about the whole folder names the changes of its kind (deletions, shrinking changes,
    new files for an index over its budget, the index for its own text)."""
    topics = {k: v for k, v in p.local.items() if k != INDEX_NAME}
    incoming = {r for r in set(topics) | set(p.merged.files) if topics.get(r) != p.merged.files.get(r)}
    out: dict[str, str] = {}
    for why in reasons:
        head = why.split(": ", 1)[0]
        if head in incoming:
            out.setdefault(head, why.split(": ", 1)[1] if ": " in why else why)
        elif head == INDEX_NAME:
            out.setdefault(INDEX_NAME, why.split(": ", 1)[-1])
            if "budget" in why:
                for r in incoming:
                    if r not in topics:
                        out.setdefault(r, why)
        elif "deletes" in why:
            for r in incoming:
                if r not in p.merged.files:
                    out.setdefault(r, why)
        elif "shrinks" in why:
            for r in incoming:
                if len(p.merged.files.get(r, b"")) < len(topics.get(r, b"")):
                    out.setdefault(r, why)
    return {r: w.replace("the run", "the remote's change") for r, w in out.items()}


@dataclass
class Session:
    """One sync job: the fetch it made and what each project did."""

    jc: JobContext
    interactive: bool = False
    identities: dict[str, Identity] = field(default_factory=dict)
    fetch_error: gitremote.SyncError | None = None
    fetches: int = 0
    pushes: int = 0
    push_deletions: bool = False  # the user said so: a push the outgoing guard would hold goes out
    keep_local: bool = False  # the user said so: held files are resolved with this machine's version
    take_remote: bool = False  # the user said so: files an undo keeps here take the remote's version back
    _whose: str | None = None  # "" once the remote was found memd's, else why not
    _refs: dict[str, str] | None = None  # the sync repository's refs as the last fetch left them (read once)
    _seen: dict[str, Any] | None = None  # gitremote.seen, read once per fetch

    @property
    def remote(self) -> str:
        return self.jc.config.sync.remote.strip()

    @property
    def machine(self) -> str:
        return gitremote.machine_name(self.jc.config.sync.machine)

    def fetch(self) -> bool:
        self.fetches += 1
        self._refs = self._seen = None
        try:
            gitremote.fetch(self.jc.state_dir, self.remote, timeout=self.jc.config.sync.timeout_s,
                            interactive=self.interactive)
        except gitremote.SyncError as e:
            self.fetch_error = e
            if not self.jc.dry_run:
                gitremote.note_fetch(self.jc.state_dir, e, self.jc.clock.time())
            return False
        self.fetch_error = None
        if not self.jc.dry_run:
            gitremote.note_fetch(self.jc.state_dir, None, self.jc.clock.time())
        return True

    def whose(self) -> str | None:
        """Why memd may not push into the remote (None: it is memd's), found once per job (a dry run marks
        nothing)."""
        if self._whose is None:
            self._whose = (gitremote.whose(self.jc.state_dir, self.remote, machine=self.machine,
                                           timeout=self.jc.config.sync.timeout_s, interactive=self.interactive,
                                           dry_run=self.jc.dry_run)
                           or "")
        return self._whose or None

    def nothing_new(self, jc: JobContext, project: Project, branch: str) -> bool:
        """The no-change sync in a few reads (what ``_round`` finds first, without its repository, forget
        records or merge): the remote's head is the one this machine last shared, and this folder's last sync
        saw that head and the folder as it is now (its files' metadata). The refs and the ``seen`` record are
        read once per fetch for every project (issue 33: a no-change sync cost 29-34 times a ``git fetch``)."""
        if jc.dry_run or self.keep_local or self.push_deletions or self.take_remote or self.fetch_error is not None:
            return False
        if self._refs is None:
            repo = gitremote.open_repo(jc.state_dir)
            try:
                self._refs = gitremote.all_refs(repo)
            finally:
                repo.close()
        remote = self._refs.get(gitremote.REMOTE_REF + branch)
        if remote is None or remote != self._refs.get(gitremote.SHARED_REF + branch):
            return False
        if self._seen is None:
            self._seen = gitremote.seen(jc.state_dir)
        last = self._seen.get(project.name)
        if not isinstance(last, dict) or last.get("branch") != branch or last.get("remote") != remote:
            return False
        return last.get("folder") == gitremote.folder_mark(project.memory_dir)

    def _check_head(self, branch: str) -> None:
        """A remote head that is no commit (a ref written to point at a tree) fails the project in words."""
        repo = gitremote.open_repo(self.jc.state_dir)
        try:
            bad = gitremote.not_a_commit(repo, branch, gitremote.heads(repo, branch).remote)
        finally:
            repo.close()
        if bad is not None:
            raise bad

    # ------------------------------------------------------------------ one project

    def project(self, jc: JobContext, project: Project) -> ProjectOutcome:
        ident = self.identities.get(project.name) or identities(jc, [project])[project.name]
        if ident.held:  # one writer per branch (issue 21 #1): this folder's memory stays here, said in status
            if not jc.dry_run:
                held.hold_project(jc.state_dir, project.name, ident.why_held, ident.resolve, kind=held.WRITER)
            return ProjectOutcome(project.name, "refused", f"{ident.why_held}; resolve: {ident.resolve}")
        if ident.identity is None or ident.branch is None:
            return ProjectOutcome(project.name, "skipped", ident.source)
        if self.fetch_error is None:
            try:
                foreign = self.whose()
            except gitremote.SyncError as e:
                return ProjectOutcome(project.name, "failed", f"{e}; {UNTOUCHED}", error=e.kind)
            if foreign is not None:
                if jc.dry_run:  # what the real sync would say, not "would send"
                    return ProjectOutcome(project.name, "refused", f"dry run: would send nothing: {foreign}")
                held.hold_project(jc.state_dir, project.name, foreign.split(" (make")[0],
                                  "point sync.remote at an empty private repository")
                return ProjectOutcome(project.name, "refused", f"{foreign}; {UNTOUCHED}")
        if self.nothing_new(jc, project, ident.branch):
            return ProjectOutcome(project.name, "unchanged", "nothing new on either side")
        self._seen = None  # this project's sync may record what it saw
        forgot_notes: list[str] = []
        for attempt in range(jc.config.sync.push_attempts):
            if self.fetch_error is not None:
                return ProjectOutcome(project.name, "failed", f"{self.fetch_error}; {UNTOUCHED}",
                                      error=self.fetch_error.kind)
            try:
                self._check_head(ident.branch)
                forgot = forgetting.honour(jc, project, ident.branch)  # a `memd forget` on another machine
                if forgot is not None and forgot.dry:
                    return ProjectOutcome(project.name, "proposed", "dry run: " + "; ".join(forgot.notes))
                forgot_notes += forgot.notes if forgot is not None else []
                out = self._round(jc, project, ident.identity, ident.branch)
                if forgot_notes:
                    out.message = "; ".join([*forgot_notes, out.message])
                    out.details["forgot"] = forgot_notes
                return out
            except _Rejected:
                (jc.log or _silent).info("sync.push_rejected", project=project.name, attempt=attempt + 1)
                self.fetch()
            except gitremote.SyncError as e:
                return ProjectOutcome(project.name, "failed", f"{e}; {UNTOUCHED}", error=e.kind)
            except ProjectBusyError as e:  # another memd writes the project: this sync applied nothing
                return ProjectOutcome(project.name, "failed", f"{e}; {UNTOUCHED}", error="busy")
        return ProjectOutcome(project.name, "failed", f"the remote moved on before each of "
                              f"{jc.config.sync.push_attempts} pushes (other machines are syncing); "
                              "the merged memory is kept here and sent at the next sync", error="rejected")

    def _round(self, jc: JobContext, project: Project, ident: str, branch: str) -> ProjectOutcome:
        cfg = jc.config
        max_bytes = cfg.budget.max_file_bytes
        repo = gitremote.open_repo(jc.state_dir)
        try:
            h = gitremote.heads(repo, branch)
            why = _rewritten(repo, h, branch, project.name)
            if why is not None:
                held.hold_project(jc.state_dir, project.name, why.split("; `")[0],
                                  f"`memd sync --forget {project.name}`")
                return ProjectOutcome(project.name, "refused", f"{why}; {UNTOUCHED}")
            last = gitremote.seen(jc.state_dir).get(project.name)
            if (not jc.dry_run and not self.keep_local and not self.push_deletions and not self.take_remote
                    and h.remote is not None and h.remote == h.shared
                    and {k: v for k, v in (last or {}).items() if k not in ("dir", "files")}
                    == {"branch": branch, "remote": h.remote, "folder": gitremote.folder_mark(project.memory_dir)}):
                return ProjectOutcome(project.name, "unchanged", "nothing new on either side")
            remote = gitremote.files_of(repo, h.remote, max_bytes)
            base_commit = gitremote.merge_base(repo, h.mine, h.remote) if h.mine and h.remote else None
            base = gitremote.files_of(repo, base_commit, max_bytes).files
            anew = _made_anew(project, last or {}, max_bytes)
            no_base = False  # merged with no common base (set below): nothing of the remote counts as deleted
            if h.shared is not None and (last is None or last.get("branch") != branch
                                         or last.get("remote") != h.shared):
                # what this machine last shared on the branch is not what this folder last synced: another
                # memory folder of this machine synced it (a second clone made the writer, two folders that
                # both synced before issue 21 #1) or this folder never did. No common base, so nothing of the
                # remote's counts as deleted here (issue 21 #1)
                base, no_base = {}, True
            elif not self.push_deletions and anew:
                # a missing folder, or one removed and made again since the last sync (a reset, an rm -rf
                # that Claude Code's next session undid by making it anew), is "nothing here yet", never
                # "delete everything": merged with no common base, the remote's memory comes back and
                # what was written here since is kept
                base, no_base = {}, True
            out = ProjectOutcome(project.name, "unchanged", run_id=None)
            fresh = gitremote.report_once(jc.state_dir, project.name, remote.ignored) if not jc.dry_run \
                else remote.ignored
            if fresh:  # left alone on the remote (kept by every push); said once, not at every sync
                out.details["ignored"] = fresh
                (jc.log or _silent).warning("sync.ignored", project=project.name, entries=fresh[:20],
                                            count=len(fresh))
            was = held.load(jc.state_dir, project.name)
            if anew and was.undone:  # what an undo kept here went with the folder: nothing left to keep apart
                was.undone = {}
            for row in was.undone.values():  # the shared version the undo was made over (the base moves on
                row.setdefault("shared", base_commit or "")  # while the file is kept apart: pushes carry the
                # remote's version of it), the base its resolution merges from
            # a file held before stays held while the remote's version is the one refused (judged anew
            # once it changes); --keep-local resolves every held file with this machine's version
            kept_local = frozenset(was.files) if self.keep_local else frozenset()
            why_held = {r: row for r, row in was.files.items() if not self.keep_local
                        and row.get("remote") == held.version(remote.files.get(r))}
            hold = frozenset(why_held)
            # finding 6: what an undo changed stays here, neither sent nor taken, until the user says which
            # side wins; a file that is the remote's version again is released. --keep-local: the undo is
            # this machine's change like any other, merged against the shared base (what other machines
            # wrote since stays); --take-remote: the undo's change is taken back out of this side first
            # (what was written here since stays), then merged: no one's later words lost
            undone = _still_undone(was.undone, project, remote, max_bytes) \
                if not (self.keep_local or self.take_remote) else {}
            local_only = frozenset(undone)
            redo = _redo(jc, project.name, was.undone) if was.undone and self.take_remote else None
            if was.undone and (self.keep_local or self.take_remote) and not no_base:
                # (a folder with no common base keeps none for its undone files either: the shared version the
                # undo was recorded over is another folder's, e.g. the clone that was the writer before
                # `memd sync --writer`, and the remote's words this folder's copy lacks would read as deleted:
                # the long tier's seed 52 took two live words off the remote so)
                base = _undone_base(repo, base, was.undone, max_bytes)
            final: list[Plan] = []
            for _ in range(MAX_HOLD_ROUNDS):
                run_id = ap.new_run_id("sync", jc.clock.time())
                final.clear()
                res = ap.run(project, self._edit(project, base, remote, hold | kept_local | local_only, final,
                                                 max_bytes, redo),
                             state_dir=jc.state_dir, job="sync", run_id=run_id, config=cfg, review=jc.dry_run,
                             log=jc.log)
                if res.verdict != ap.Verdict.REJECTED:
                    break
                new = {r: w for r, w in culprits(res.reasons, final[0]).items() if r not in hold}
                if not new:  # nothing more to hold one by one: the project's incoming changes are refused
                    break
                now = jc.clock.time()
                why_held.update({r: {"reason": w, "remote": held.version(remote.files.get(r)), "since": now}
                                 for r, w in new.items()})
                hold = frozenset(why_held)
            p = final[0]

            def guard(outgoing: dict[str, bytes]) -> list[str]:  # the outgoing guard, as _send applies it
                if h.remote is None or self.push_deletions:
                    return []
                return core_guard.loss_reasons(remote.files, outgoing, ap.limits_of(cfg), subject="this push")

            out.details["identity"] = ident
            out.details["conflicts"] = p.merged.conflict_files()
            out.details["held"] = sorted(why_held)
            out.added, out.changed, out.deleted = len(res.added), len(res.changed), len(res.deleted)
            if res.verdict == ap.Verdict.REJECTED:
                msg = "the remote's changes were refused by the guards, nothing applied: " + "; ".join(res.reasons)
                if not jc.dry_run:
                    held.hold_project(jc.state_dir, project.name, msg, f"`memd sync --forget {project.name}` "
                                      "after fixing it on the machine that wrote it")
                return _with(out, "refused", msg)
            if res.verdict == ap.Verdict.ABANDONED:
                return _with(out, "skipped", "stopped before applying")
            if res.verdict == ap.Verdict.REVIEW:
                out.details["diff"] = res.diff
                return _with(out, "proposed", _dry_note(p, remote, hold, guard, local_only))
            if res.verdict == ap.Verdict.APPLIED:
                out.run_id = run_id
                out.outcome = "changed"
            if not jc.dry_run:
                self._keep_conflicts(jc, project, p, h.remote or "", res.history or run_id)
            if res.dropped:
                return _with(out, "partial", f"{len(res.dropped)} file(s) changed here while merging were left "
                             "as they are; nothing sent (the next sync merges them)")
            if jc.dry_run:
                return _with(out, "unchanged" if not p.local_changes else "proposed",
                             _dry_note(p, remote, hold, guard, local_only))
            held.save(jc.state_dir, project.name, held.Held(why_held, {}, undone if not self.keep_local
                                                              else was.undone))
            try:
                sent = self._send(jc, repo, project, branch, h, remote, max_bytes, hold, local_only)
            except _Held as e:
                msg = held_message(project.name, e.reasons)
                held.hold_project(jc.state_dir, project.name, "; ".join(e.reasons) + " on the remote",
                                  f"`memd sync --push-deletions {project.name}` if that is meant, else "
                                  f"`memd sync --forget {project.name}` takes the remote's memory back")
                return _with(out, "refused", _summary(res, p, msg, why_held, project.name, undone))
            if self.keep_local and was.undone:  # sent: this machine's version is the shared one now
                held.save(jc.state_dir, project.name, held.Held(why_held, {}))
            return _with(out, out.outcome, _summary(res, p, sent, why_held, project.name, undone))
        finally:
            repo.close()

    def _edit(self, project: Project, base: dict[str, bytes], remote: gitremote.TreeFiles, hold: frozenset[str],
              final: list[Plan], max_bytes: int, redo: Redo | None = None) -> Callable[[ap.Workspace], ap.Edits]:
        """The merge as ``apply.run``'s edit step; the plan it made lands in ``final``."""

        def edit(ws: ap.Workspace) -> ap.Edits:
            day = time.strftime("%Y-%m-%d", time.localtime(self.jc.clock.time()))
            first = plan(base, file_map(project.memory_dir, max_bytes), remote, hold, day, redo)
            final.append(first)
            if not first.local_changes:
                return ap.Edits(note=_note(first, remote.machine))
            st = ws.get()  # merged again from exactly what was staged (the folder may have moved)
            p = plan(base, {rel: b.data for rel, b in st.baseline.items()}, remote, hold, day, redo)
            final[0] = p
            _write(st, p)
            # index lines the other machine's user removed or corrected: their removal sticks; so does the
            # resolution of a conflict block there (its lines, entries too, the user decided about)
            theirs = set(mg.prose(_text(remote.files.get(INDEX_NAME)))) if INDEX_NAME in remote.files else None
            gone = () if theirs is None or INDEX_NAME in hold else tuple(
                [ln for ln in mg.prose(_text(base.get(INDEX_NAME))) if ln not in theirs]
                + mg.resolved_lines(_text(base.get(INDEX_NAME)), _text(remote.files.get(INDEX_NAME))))
            return ap.Edits(note=_note(p, remote.machine), removed_by_user=gone, index_merged=True)

        return edit

    def _send(self, jc: JobContext, repo: Any, project: Project, branch: str, h: gitremote.Heads,
              remote: gitremote.TreeFiles, max_bytes: int, hold: frozenset[str] = frozenset(),
              local_only: frozenset[str] = frozenset()) -> str:
        """Push the folder as it is now, unless the remote holds all of it; returns what was done. A held
        file goes out as the remote has it (never this machine's version over the one held); so does a
        file an undo keeps here (``local_only``, the index too: the undo stays on this machine)."""
        mark = gitremote.folder_mark(project.memory_dir)  # before reading: a later write is seen next time
        now_files = {k: v for k, v in file_map(project.memory_dir, max_bytes).items() if gitremote.synced(k)}
        forgotten = frozenset(forgetting.withhold(jc.state_dir, project.name, now_files, remote.files))
        outgoing, withheld = outgoing_files(now_files, remote.files, hold, local_only, forgotten, unread(remote))
        for why, files in withheld.items():
            (jc.log or _silent).warning("sync.withheld", project=project.name, files=files[:20], reason=why)
        ot, oi = _split(outgoing)
        rt, ri = _split(remote.files)
        note = _withheld_note(withheld)
        if ot == rt and (oi is None or oi == ri) and (h.remote is not None or not outgoing):
            if h.remote is not None:
                gitremote.remember(repo, branch, shared=h.remote, mine=h.remote)
            gitremote.mark_seen(jc.state_dir, project.name, branch, h.remote, mark,
                                gitremote.folder_id(project.memory_dir), list(now_files))
            return "nothing to send" + note
        if h.remote is not None and not self.push_deletions:
            lost = core_guard.loss_reasons(remote.files, outgoing, ap.limits_of(jc.config), subject="this push")
            if lost:
                (jc.log or _silent).warning("sync.held", project=project.name, reasons=lost)
                raise _Held(lost)
        delta = len({k for k in set(ot) | set(rt) if ot.get(k) != rt.get(k)}) + (oi is not None and oi != ri)
        summary = f"sync from {self.machine}: {delta} file(s) differ from the remote"
        new = gitremote.commit(repo, outgoing, h.remote, machine=self.machine, summary=summary,
                               now=jc.clock.time(), kept=remote.kept)
        gitremote.remember(repo, branch, mine=new)
        try:
            gitremote.push(jc.state_dir, self.remote, new, branch, timeout=jc.config.sync.timeout_s,
                           interactive=self.interactive)
        except gitremote.SyncError as e:
            if e.kind == "rejected":
                raise _Rejected() from None
            raise gitremote.SyncError(f"{e} (the merge is kept here and sent at the next sync)", kind=e.kind) \
                from None
        self.pushes += 1
        gitremote.remember(repo, branch, shared=new)
        repo.refs[f"refs/remotes/origin/{branch}".encode()] = new.encode("ascii")
        gitremote.mark_seen(jc.state_dir, project.name, branch, new, mark, gitremote.folder_id(project.memory_dir),
                            list(now_files))
        return f"sent {delta} file(s)" + note

    def _keep_conflicts(self, jc: JobContext, project: Project, p: Plan, remote_commit: str, run: str) -> None:
        if not p.merged.conflicts:
            return
        now = jc.clock.time()
        rows = [evidence.Conflict(evidence.conflict_id(c.rel, _mine(c), c.remote or b""), project.name, c.rel,
                                  _text(_mine(c)), _text(c.remote), _opt(p.base.get(c.rel)),
                                  p.remote.machine or "another machine", remote_commit, now)
                for c in p.merged.conflicts]
        fresh = evidence.record(jc.state_dir, project.name, rows)
        if not fresh:
            return
        theirs = dict(file_map(project.memory_dir, jc.config.budget.max_file_bytes))
        theirs.update((c.rel, c.remote) for c in p.merged.conflicts if c.remote is not None)
        try:
            history.commit_files(jc.state_dir, project.name, theirs,
                                 f"the other side of {len(fresh)} sync conflict(s) from {fresh[0].machine} "
                                 f"(kept for the next dream; the folder keeps its own text, then the other "
                                 f"side's differing lines in a conflict block)", kind="theirs", job="sync")
        except MemdError as e:
            (jc.log or _silent).warning("history.failed", project=project.name, error=str(e))
        for c in fresh:
            (jc.log or _silent).warning("sync.conflict", project=project.name, file=c.file, machine=c.machine,
                                        conflict=c.id, run=run)


def outgoing_files(now_files: dict[str, bytes], remote: dict[str, bytes], hold: frozenset[str] = frozenset(),
                   local_only: frozenset[str] = frozenset(), forgotten: frozenset[str] = frozenset(),
                   unread: frozenset[str] = frozenset()) -> tuple[dict[str, bytes], dict[str, list[str]]]:
    """What a push of the folder ``now_files`` carries over the remote's ``remote``, and what stays here
    (why -> files): a file that ``stays_here``, is held, or holds again what `memd forget` took out
    (``forgotten``: ``memd.sync.forget.withhold``) goes out as the remote has it (never a deletion
    there), so does a file an undo keeps here (``local_only``, the index too), and so does the remote's
    index when there is none here. ``unread``: the remote's files this machine cannot read (its size
    limit, a name or text it cannot decode), which go out untouched: so do their index lines (this
    machine's rebuilt index has no entry for a file it does not have)."""
    outgoing: dict[str, bytes] = {}
    withheld: dict[str, list[str]] = {}
    for rel, data in now_files.items():
        why = stays_here(rel, data)
        if why is None:
            outgoing[rel] = data
            continue
        withheld.setdefault(why, []).append(rel)
        if rel in remote:  # the remote keeps its own version: never a deletion there
            outgoing[rel] = remote[rel]
    for rel in sorted(forgotten):
        if any(rel in files for files in withheld.values()):
            continue
        withheld.setdefault("what `memd forget` took out", []).append(rel)  # never sent again
        if rel in remote:
            outgoing[rel] = remote[rel]
        else:
            outgoing.pop(rel, None)
    for rel in hold | local_only:  # the index too (issue 33): a held index pushed flipped the remote's for good
        if rel in remote:
            outgoing[rel] = remote[rel]
        else:
            outgoing.pop(rel, None)
    if INDEX_NAME not in outgoing and INDEX_NAME in remote:  # no index here: never a deletion there
        outgoing[INDEX_NAME] = remote[INDEX_NAME]
    if unread and INDEX_NAME in outgoing and INDEX_NAME in remote and INDEX_NAME not in local_only | hold:
        outgoing[INDEX_NAME] = with_entries_of(outgoing[INDEX_NAME], remote[INDEX_NAME], unread)
    return outgoing, withheld


def with_entries_of(index: bytes, remote_index: bytes, files: frozenset[str]) -> bytes:
    """``index`` with the remote index's entry lines for ``files`` that it lacks, each put back after the
    line it followed there (or at the end)."""
    from memd.core import index as mindex

    theirs = _text(remote_index)
    want = [e for e in mindex.parse(theirs).entries if e.is_local and e.file in files]
    if not want:
        return index
    mine = _text(index)
    nl = "\r\n" if "\r\n" in mine else "\n"
    lines = mine.split(nl)
    have = {ln.rstrip("\r") for ln in lines}
    trail = lines[-1] == ""
    if trail:
        lines.pop()
    rlines = theirs.replace("\r\n", "\n").split("\n")
    for e in want:
        text = e.text.rstrip("\r")
        if text in have:
            continue
        at = len(lines)
        for prev in reversed(rlines[:e.line - 1]):  # the nearest line above it there that is here too
            if prev.strip() and prev in lines:
                at = lines.index(prev) + 1
                break
        lines.insert(at, text)
        have.add(text)
    return (nl.join(lines) + (nl if trail else "")).encode("utf-8")


def unread(remote: gitremote.TreeFiles) -> frozenset[str]:
    """The remote's entries this machine leaves alone, by the path an index entry would link to."""
    return frozenset(k.decode("utf-8", "replace") for k in remote.kept)


def _withheld_note(withheld: dict[str, list[str]]) -> str:
    return "".join(f"; {len(files)} file(s) with {why} not sent" for why, files in withheld.items())


def _counts(before: dict[str, bytes], after: dict[str, bytes]) -> str:
    """``2 new, 1 changed, 1 deleted (a.md, b.md, c.md; deleted: d.md)`` between two sets of topic files."""
    new = sorted(set(after) - set(before))
    changed = sorted(r for r in set(after) & set(before) if after[r] != before[r])
    gone = sorted(set(before) - set(after))
    if not (new or changed or gone):
        return "nothing"

    def names(rels: list[str]) -> str:
        return ", ".join(rels[:5]) + (f" and {len(rels) - 5} more" if len(rels) > 5 else "")

    shown = [names(new + changed)] if new or changed else []
    if gone:
        shown.append(f"deleted: {names(gone)}")
    return f"{len(new)} new, {len(changed)} changed, {len(gone)} deleted ({'; '.join(shown)})"


def _mine(c: mg.FileMerge) -> bytes:
    """This side of a conflict as it was before the merge added the other side's block."""
    return c.local if c.local is not None else (c.result or b"")


def _made_anew(project: Project, last: dict[str, Any], max_bytes: int) -> bool:
    """The memory folder is missing, or was removed and made again since the last sync: another folder
    (device and inode), or one holding files but none of those the last sync left in it (the inode of a
    removed folder may be reused at once). A folder left empty is not "made anew": its push is held by
    the outgoing guard and said (a deletion the user may have meant)."""
    here = gitremote.folder_id(project.memory_dir)
    if here is None:
        return True
    if last.get("dir", here) != here:
        return True
    known = last.get("files")
    if not known:
        return False
    now = {k for k in file_map(project.memory_dir, max_bytes) if gitremote.synced(k)}
    return bool(now) and not (now & set(known))


def _still_undone(undone: dict[str, dict[str, Any]], project: Project, remote: gitremote.TreeFiles,
                  max_bytes: int) -> dict[str, dict[str, Any]]:
    """The files an undo keeps here that still differ from the remote's version (the rest is released:
    both sides agree again, nothing is left to keep apart)."""
    if not undone:
        return {}
    local = file_map(project.memory_dir, max_bytes)
    return {r: row for r, row in undone.items() if local.get(r) != remote.files.get(r)}


def _undone_base(repo: Any, base: dict[str, bytes], undone: dict[str, dict[str, Any]],
                 max_bytes: int) -> dict[str, bytes]:
    """The merge base with each undone file as it was shared when the undo was made (recorded by the
    first sync after it): what this machine's side and the remote's both descend from."""
    out = dict(base)
    trees: dict[str, dict[str, bytes] | None] = {}
    for rel, row in undone.items():
        commit = str(row.get("shared", ""))
        if commit not in trees:
            try:
                trees[commit] = gitremote.files_of(repo, commit or None, max_bytes).files
            except gitremote.SyncError:  # gone from the repository: the base as it is now
                trees[commit] = None
        tree = trees[commit]
        if tree is None:
            continue
        if rel in tree:
            out[rel] = tree[rel]
        else:
            out.pop(rel, None)
    return out


def _redo(jc: JobContext, project: str, undone: dict[str, dict[str, Any]]) -> Redo:
    """Per undone file and undo, what the undo wrote and what it reverted, from its two history commits.
    An undo whose commits memd's history no longer has is left as it is here (then merged as ever)."""
    trees: dict[str, dict[str, bytes] | None] = {}

    def tree(commit: str) -> dict[str, bytes] | None:
        if commit not in trees:
            try:
                trees[commit] = history.files_at(jc.state_dir, project, commit) if commit else None
            except MemdError:
                trees[commit] = None
        return trees[commit]

    out: Redo = {}
    for rel, row in undone.items():
        for u in row.get("undos") or []:
            wrote, reverted = tree(str(u.get("after") or "")), tree(str(u.get("before") or ""))
            if wrote is not None and reverted is not None:
                out.setdefault(rel, []).append((wrote.get(rel), reverted.get(rel)))
    return out


def held_message(project: str, reasons: list[str]) -> str:
    """The words for a push the outgoing guard holds."""
    return (f"held, nothing sent: {'; '.join(reasons)} on the remote (the guard's shares, "
            f"dream.max_delete_share and dream.max_shrink_share); if that is what you meant, "
            f"`memd sync --push-deletions {project}` sends it; if not, `memd sync --forget {project}` "
            "takes the remote's memory back at the next sync")


def _rewritten(repo: Any, h: gitremote.Heads, branch: str, project: str) -> str | None:
    if h.shared is None:
        return None
    if h.remote is None:
        return (f"the remote's branch {branch} is gone (deleted, or the remote was replaced); "
                f"`memd sync --forget {project}` starts over from whatever the remote holds")
    if not gitremote.descends(repo, h.shared, h.remote):
        return (f"the remote's branch {branch} was rewritten (force-pushed): commit {h.shared[:12]} we last "
                f"shared is not in its history; `memd sync --forget {project}` merges with it anew "
                "(every difference then counts as a conflict and keeps the local file)")
    return None


def _write(st: ap.Staging, p: Plan) -> None:
    """The merged files into the staging copy (the index last: the rebuild then runs over it)."""
    topics, index = _split(p.local)
    for rel in sorted(set(topics) | set(p.merged.files)):
        new = p.merged.files.get(rel)
        if new == topics.get(rel):
            continue
        path = st.root / rel
        if new is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            path.write_bytes(new)
    if p.index is not None and p.index != index:
        (st.root / INDEX_NAME).write_text(p.index, encoding="utf-8", newline="")


def _note(p: Plan, machine: str) -> str:
    parts = []
    if p.merged.taken:
        parts.append(f"{len(p.merged.taken)} file(s) from {machine or 'the remote'}")
    if p.merged.conflicts:
        parts.append(f"{len(p.merged.conflicts)} conflict(s) kept with both sides in the file")
    return ", ".join(parts)


def _dry_note(p: Plan, remote: gitremote.TreeFiles, hold: frozenset[str], outgoing_guard: Callable[
        [dict[str, bytes]], list[str]], local_only: frozenset[str] = frozenset()) -> str:
    """Both directions of a dry run: what the merge would take into the folder, and what the push after
    it would send (topic files, deletions counted; the index is rebuilt and sent with them), or why it
    would be held."""
    local_topics, local_index = _split(p.local)
    bits = [f"would take from {remote.machine or 'the remote'}: {_counts(local_topics, p.merged.files)}"]
    if p.merged.conflicts:
        bits.append(f"{len(p.merged.conflicts)} conflict(s) kept with both sides in the file: "
                    + ", ".join(p.merged.conflict_files()))
    after = dict(p.merged.files)
    index = p.index if p.index is not None else local_index
    if index is not None:
        after[INDEX_NAME] = index.encode("utf-8")
    outgoing, withheld = outgoing_files(after, remote.files, hold, local_only, unread=unread(remote))
    sent = _counts(_split(remote.files)[0], _split(outgoing)[0])
    lost = outgoing_guard(outgoing) if sent != "nothing" else []
    if lost:
        bits.append(f"would send nothing: held, {'; '.join(lost)} on the remote (`--push-deletions` sends it)")
    else:
        bits.append(f"would send: {sent}")
    return "dry run: " + "; ".join(bits) + _withheld_note(withheld)


def _summary(res: ap.RunResult, p: Plan, sent: str, why_held: dict[str, dict[str, Any]] | None = None,
             project: str = "PROJECT", undone: dict[str, dict[str, Any]] | None = None) -> str:
    bits = []
    if res.verdict == ap.Verdict.APPLIED:
        bits.append(f"took {res.summary}")
    if why_held:
        bits.append(f"held {len(why_held)} file(s) of the remote here: "
                    + "; ".join(f"{r} ({row.get('reason', '')})" for r, row in sorted(why_held.items())[:3])
                    + f" (`memd sync --keep-local {project}` sends this machine's version)")
    if undone:
        bits.append(held.undone_line(project, undone))
    if p.merged.conflicts:
        bits.append(f"{len(p.merged.conflicts)} conflict(s) kept with both sides in the file (a marked block; "
                    "`memd check` shows where): "
                    + ", ".join(p.merged.conflict_files()[:5]))
    bits.append(sent)
    return "; ".join(bits)


def _with(out: ProjectOutcome, outcome: Any, message: str) -> ProjectOutcome:
    out.outcome = outcome
    out.message = message
    return out


class _Silent:
    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *a, **k: None


_silent: Any = _Silent()


# --------------------------------------------------------------------------- the job


def synced_projects(jc: JobContext, projects: list[Project], *,
                    named: bool) -> tuple[list[Project], dict[str, Identity]]:
    """The projects to sync and every project's identity: named projects are all run (an unsynced one
    ends ``skipped`` with the reason); of all projects, only those with an identity."""
    idents = identities(jc, projects)
    chosen = projects if named else [p for p in projects if idents[p.name].identity is not None]
    if not jc.dry_run:  # a folder no longer held as a second writer (resolved, excluded) is released
        held.release_writers(jc.state_dir, [n for n, i in idents.items() if not i.held])
    return chosen, idents


def identities(jc: JobContext, projects: list[Project]) -> dict[str, Identity]:
    """The projects' identities, one writer per identity on this machine (``identify_all``)."""
    return identify_all(projects, jc.config, jc.state, seen=gitremote.seen(jc.state_dir),
                        writers=load_writers(jc.state_dir), cwds_memo=jc.memo.setdefault("cwds", {}))


def run_sync(jc: JobContext, projects: list[Project], *, named: bool = False, interactive: bool = False,
             push_deletions: bool = False, keep_local: bool = False, take_remote: bool = False,
             before_project: Callable[[Project], Any] | None = None,
             after_project: Callable[[Project, ProjectOutcome | None], Any] | None = None) -> JobResult:
    """The sync job over projects (see the module doc). Sync must be on (``sync.remote``)."""
    from memd.errors import ConfigError
    from memd.jobs.runner import run_job

    if not jc.config.sync.remote.strip():
        raise ConfigError(["sync.remote: sync is off (set it to a private git repository of yours; docs/sync.md)"])
    session = Session(jc, interactive=interactive, push_deletions=push_deletions, keep_local=keep_local,
                      take_remote=take_remote)
    chosen, session.identities = synced_projects(jc, projects, named=named)
    if any(i.identity for i in session.identities.values() if i.project in {p.name for p in chosen}):
        session.fetch()
    result = run_job("sync", jc, chosen, work=session.project, before_project=before_project,
                     after_project=after_project)
    (jc.log or _silent).info("sync.done", fetches=session.fetches, pushes=session.pushes,
                             projects=len(chosen))
    return result
