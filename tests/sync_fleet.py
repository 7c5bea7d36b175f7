"""The fleet (issue 21): a model-based test of the whole sync protocol, as hypothesis stateful testing.

Three simulated machines (their own HOME, Claude folder and memd state; the same repositories at
different paths) share one bare git remote. ``Fleet`` is the state machine
(``hypothesis.stateful.RuleBasedStateMachine``); its rules are what users and their machines do, in any
order hypothesis picks:

- topic files: a word added after a slot marker (two machines writing after the same marker conflict,
  after different ones they merge), a new file, a file deleted, a word corrected;
- MEMORY.md: a note line added, corrected, removed (issue 21 finding 4: corrections and removals stick);
  150 to 250 long lines at once (issue 33: an index over its budget, on one machine or only in the merge, is
  never shortened by a sync and still settles);
- resets: a memory folder emptied (files removed, the folder kept) or removed;
- ``memd undo`` of the last run (finding 6: undo is local), and its resolution, ``--keep-local`` or
  ``--take-remote``;
- dreams: the keyless dream (model work off: the index repair), a model dream through the real
  Anthropic SDK against the loopback Messages-API stub with a scripted ``str_replace`` tool call (a
  correction), and the resolution of conflict blocks (markers removed, lines kept: what the user or the
  dream does);
- syncs, and offline spells (a machine's remote unreachable for its next few syncs).

The model of the words is ``Words``: every word written (a unique token) is *live* until a machine
removes it on purpose (a deleted file, a correction, an undo sent with ``--keep-local``); a word that
never left a machine a reset wiped is the user's own loss. A purposeful removal is *armed* (it must
stick) unless a concurrent write could keep the word legitimately: a machine that still held the word
wrote that file (modify/delete keeps the file; the same lines changed on both sides keep both), an
undo brought it back, a reset wiped the only intent, a ``--forget`` or ``--keep-local`` merged a stale
copy with no common base.

Invariants after every step: memd never wrote in ``memory/team/`` and left no file of its own in a memory
folder; a machine with something held has a ``sync`` status line naming the project. After every sync:
no push went past the outgoing guard (nobody said ``--push-deletions``); every live word that ever
reached the remote is still there; a ``refused`` outcome has its status line. At quiescence (teardown:
everyone online, holds resolved as a user would, syncs until nothing changes): every machine holds the
same files; every live word is in them (inside a conflict block or not); armed removals stuck; every
conflict surfaced once per memory folder that met it; nothing is held; two more syncs of every machine make
no commit anywhere (issue 33).

The quick tier runs in every test run (``tests/test_sync_fleet.py``); the long tier (2,000+ steps) is
``bench/bench_sync.py --fleet-only N [--seed S]``; figures in docs/sync.md ("The fleet test").

Issue 21 finding 1 (identity per memory folder Claude Code uses, merged from wt-syncid): every machine
also has, per project, a Claude folder for a session run in a git worktree of the repository and one
for a session run in a monorepo subfolder (transcripts whose ``cwd`` is there, no memory of their own:
Claude Code keeps their memory with the main checkout; ``Fleet.SESSION_FOLDERS``,
``add_session_folder``). Syncs then run over every Claude folder (``memd sync --all``); an invariant
checks sync never made one of them a writer (no memory folder appears there), and every other
invariant holds with them present.

The second clone (``Fleet.CLONE``'s machine): another checkout of app with a memory folder of its own,
held while the other syncs. ``Machine.repos["app"]`` is always the writing checkout (so every rule and
invariant above sees the writer), ``held_src`` the held one; ``clone_session_writes`` writes in the held
folder, ``writer_switch`` runs the real ``memd sync --writer``. Invariants: the held folder is never
touched (byte for byte), none of its words reaches the branch, it has its status line, the writers
converge. ``forget_word`` runs the real ``memd forget --string``: the word is then in no machine's writing
folder or its history, and not on the remote (after every sync, and at quiescence).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from tests.plugins.sync import Machine, bare_remote, topic

SLOTS = 6
NAMES = ("ma", "mb", "mc")
TEAM = "team/shared.md"
TEAM_TEXT = topic("shared", "a team memory; Claude Code syncs it, memd never writes it\n")
TOKEN = re.compile(r"\b(?:tok|idx)-\d+-m[a-c]\b")
NOTE = "Note "  # an index line of the user's: "Note idx-3-ma: ..."
MAX_NOTES = 12  # note lines index_edit adds at most (index_grow is the rule that passes the budget)
BRANCHES = {"app": "memory/github.com/me/app", "lib": "memory/github.com/me/lib"}


def tokens(text: str) -> set[str]:
    return set(TOKEN.findall(text))


def _body(name: str) -> str:
    return "".join(f"<!-- slot {k} of {name} -->\n" for k in range(SLOTS))


@dataclass
class FleetReport:
    """What the fleet did, over every example a campaign ran (a run of the quick or the long tier)."""

    examples: int = 0
    steps: int = 0
    rules: dict[str, int] = field(default_factory=dict)
    syncs: int = 0
    failed_syncs: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    words: int = 0  # words written
    words_removed: int = 0  # removed on purpose
    reset_losses: int = 0  # words a reset wiped before they ever left their machine (the user's loss)
    armed: int = 0  # purposeful removals checked at quiescence
    lost: list[str] = field(default_factory=list)
    came_back: list[str] = field(default_factory=list)  # armed removals that did not stick
    guard_breaches: list[str] = field(default_factory=list)
    lost_on_remote: list[str] = field(default_factory=list)
    silent_holds: list[str] = field(default_factory=list)
    conflicts: int = 0  # conflicts recorded (each surfaced once: one record, one event)
    conflict_events: int = 0
    duplicate_conflicts: int = 0  # a folder that recorded one conflict twice (must be 0)
    met_twice: int = 0  # one conflict (same file, same two versions) recorded by two machines or folders
    met_twice_where: list[str] = field(default_factory=list)
    blocks_seen: int = 0  # conflict blocks seen in files after syncs
    open_blocks: int = 0  # conflict blocks left at quiescence (visible, for the user or the dream)
    model_dreams: int = 0
    undos_kept_local: int = 0
    clone_words: int = 0  # words a session of the second clone wrote into its own (held) folder
    writer_switches: int = 0  # `memd sync --writer` between the two clones
    writer_refusals: int = 0  # `--writer` of a held folder with no memory that never synced: refused by design
    clone_races: list[str] = field(default_factory=list)  # the held folder's words on the remote, or touched
    forgets: int = 0  # `memd forget --string` runs that took a word out
    forgotten_left: list[str] = field(default_factory=list)  # a forgotten word still in files, history, remote
    converged: int = 0
    not_converged: int = 0
    still_committing: int = 0  # examples whose quiet syncs still made a commit (issue 33: must be 0)
    quiet_rounds: int = 0
    seconds: float = 0.0

    def count(self, name: str) -> None:
        self.steps += 1
        self.rules[name] = self.rules.get(name, 0) + 1


def summary(rep: FleetReport) -> dict[str, Any]:
    return {"examples": rep.examples, "steps": rep.steps, "syncs": rep.syncs, "failed_syncs": rep.failed_syncs,
            "words": rep.words, "words_removed": rep.words_removed, "reset_losses": rep.reset_losses,
            "armed_removals": rep.armed, "lost": len(rep.lost), "came_back": len(rep.came_back),
            "guard_breaches": len(rep.guard_breaches), "lost_on_remote": len(rep.lost_on_remote),
            "silent_holds": len(rep.silent_holds), "conflicts": rep.conflicts,
            "conflict_events": rep.conflict_events, "duplicates": rep.duplicate_conflicts,
            "met_twice": rep.met_twice, "met_twice_where": rep.met_twice_where[:20],
            "blocks_seen": rep.blocks_seen, "open_blocks": rep.open_blocks, "model_dreams": rep.model_dreams,
            "undos_kept_local": rep.undos_kept_local, "clone_words": rep.clone_words,
            "writer_switches": rep.writer_switches, "writer_refusals": rep.writer_refusals,
            "clone_races": len(rep.clone_races), "forgets": rep.forgets,
            "forgotten_left": len(rep.forgotten_left), "converged": rep.converged,
            "still_committing": rep.still_committing, "not_converged": rep.not_converged,
            "quiet_rounds": rep.quiet_rounds, "rules": rep.rules,
            "outcomes": rep.outcomes, "seconds": round(rep.seconds, 1)}


# --------------------------------------------------------------------------- helpers over the world


def remote_files(remote: str, key: str = "app") -> dict[str, bytes]:
    """The files of the remote's branch (the index included), read straight from the bare repository."""
    from dulwich.repo import Repo

    from memd.sync import gitremote

    repo = Repo(remote.removeprefix("file://"))
    try:
        try:
            head = repo.refs[f"refs/heads/{BRANCHES[key]}".encode()]
        except KeyError:
            return {}
        return dict(gitremote.files_of(repo, head.decode("ascii"), 10**7).files)
    finally:
        repo.close()


def remote_topics(remote: str, key: str = "app") -> dict[str, bytes]:
    return {k: v for k, v in remote_files(remote, key).items() if k != "MEMORY.md"}


def files_of(m: Machine, key: str = "app") -> dict[str, bytes]:
    """A machine's synced files (topic files and the index; never team/)."""
    from memd.memfolder.folder import file_map

    if not m.mem(key).is_dir():
        return {}
    return {k: v for k, v in file_map(m.mem(key)).items() if not k.startswith("team/")}


def dir_files(folder: Path) -> dict[str, bytes]:
    """A memory folder's synced files by path (the held clone's; ``files_of`` is the writer's)."""
    from memd.memfolder.folder import file_map

    return {k: v for k, v in file_map(folder).items() if not k.startswith("team/")} if folder.is_dir() else {}


def remote_holds(remote: str, word: str) -> int:
    """How many objects a ref of the bare remote reaches hold ``word`` (git's own view of it)."""
    import subprocess

    where = remote.removeprefix("file://")

    def git(*args: str, data: bytes | None = None) -> bytes:
        return subprocess.run(["git", "-C", where, *args], input=data, capture_output=True, check=True).stdout

    shas = [ln.split()[0] for ln in git("rev-list", "--all", "--objects").decode().splitlines() if ln]
    return git("cat-file", "--batch", data="\n".join(shas).encode() + b"\n").count(word.encode()) if shas else 0


def history_holds(state_dir: Path, project: str, word: str) -> int:
    """How many objects of a project's memd history (every object it keeps, reachable or not) hold ``word``."""
    from dulwich.repo import Repo

    from memd import history

    path = history.repo_dir(state_dir, project)
    if not path.exists():
        return 0
    repo = Repo(str(path))
    try:
        return sum(1 for sha in repo.object_store
                   if word.encode() in getattr(repo[sha], "data", b"") + getattr(repo[sha], "message", b""))
    finally:
        repo.close()


def text_of(files: dict[str, bytes]) -> str:
    return "\n".join(v.decode("utf-8", "replace") for v in files.values())


def forget_shared(m: Machine, key: str = "app") -> None:
    """`memd sync --forget PROJECT`."""
    from memd.sync import gitremote, held

    repo = gitremote.open_repo(m.state_dir)
    try:
        gitremote.forget(repo, BRANCHES[key])
    finally:
        repo.close()
    held.forget(m.state_dir, m.project(key).name)


def resolve_blocks(m: Machine, key: str = "app") -> bool:
    """What the user (or the dream) does with conflict blocks: keep every line, delete the markers; the
    conflicts handed to the dream are settled (``memd.sync.evidence``). Through ``apply.run``, as a run."""
    from memd import apply as ap
    from memd.core import conflict as cblock
    from memd.sync import evidence

    project = m.project(key)
    rows = evidence.open_conflicts(m.state_dir, project.name)
    have_blocks = any(cblock.BEGIN in v.decode("utf-8", "replace") for v in files_of(m, key).values())
    if not rows and not have_blocks:
        return False

    def edit(ws: ap.Workspace) -> ap.Edits:
        root = ws.get().root
        for path in sorted(root.rglob("*.md")):
            if path.relative_to(root).parts[0] == "team":
                continue
            text = path.read_text(encoding="utf-8")
            if cblock.BEGIN in text:
                path.write_text("".join(ln for ln in text.splitlines(keepends=True) if not cblock.is_marker(ln)),
                                encoding="utf-8")
        return ap.Edits(note="resolved sync conflict blocks")

    res = ap.run(project, edit, state_dir=m.state_dir, job="dream", run_id=ap.new_run_id("dream", time.time()),
                 config=m.config, review=False)
    if res.verdict in (ap.Verdict.APPLIED, ap.Verdict.UNCHANGED):
        evidence.settle(m.state_dir, project.name, [c.id for c in rows])
    return True


def add_session_folder(m: Machine, key: str, kind: str) -> Path:
    """A Claude folder for a session of project ``key`` run in a git worktree (``kind="worktree"``) or in
    a monorepo subfolder (``"subfolder"``): a transcript whose cwd is there and no memory folder (Claude
    Code keeps that session's memory with the repository's main checkout). The hook of finding 1."""
    from memd import layout

    src = m.repos[key]
    if kind == "worktree":
        cwd = src.parent / f"{src.name}-wt"
        gitdir = src / ".git" / "worktrees" / "wt"
        gitdir.mkdir(parents=True, exist_ok=True)
        (gitdir / "commondir").write_text("../..\n")
        (gitdir / "gitdir").write_text(str(cwd / ".git") + "\n")
        cwd.mkdir(parents=True, exist_ok=True)
        (cwd / ".git").write_text(f"gitdir: {gitdir}\n")
    else:
        cwd = src / "packages" / "sub"
        cwd.mkdir(parents=True, exist_ok=True)
    folder = m.claude / "projects" / layout.sanitize(str(cwd))
    folder.mkdir(parents=True, exist_ok=True)
    rec = {"type": "user", "cwd": str(cwd), "sessionId": str(uuid.uuid4()), "message": {"content": "hi"}}
    (folder / f"{uuid.uuid4()}.jsonl").write_text(json.dumps(rec) + "\n")
    return folder


# --------------------------------------------------------------------------- the model of the words


@dataclass
class Words:
    live: set[str] = field(default_factory=set)  # must be visible at quiescence
    armed: dict[str, str] = field(default_factory=dict)  # removed on purpose: must stay gone (token -> how)
    ever_shared: set[str] = field(default_factory=set)  # reached the remote at least once

    def disarm(self, words: set[str]) -> None:
        for w in words & set(self.armed):
            del self.armed[w]


# --------------------------------------------------------------------------- the state machine


class Fleet(RuleBasedStateMachine):
    """Three machines, one remote; see the module doc. Class attributes are the campaign's options."""

    PROJECTS: ClassVar[tuple[str, ...]] = ("app",)
    SESSION_FOLDERS: ClassVar[tuple[str, ...]] = ("worktree", "subfolder")  # finding 1 (see the module doc)
    report: ClassVar[FleetReport] = FleetReport()
    CLONE: ClassVar[str | None] = "mc"  # the machine with a second clone of app (None: no clone)
    stub: ClassVar[Any] = None  # a tests.plugins.stub_api.StubAPI: model dreams on (None: off)
    keep_dirs: ClassVar[bool] = False

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="memd-fleet-"))
        self.remote = "file://" + str(bare_remote(self.root / "remote.git"))
        self.nowhere = "file://" + str(self.root / "offline-nowhere.git")
        self.machines = {n: Machine(self.root, n, self.remote, repos=self.PROJECTS) for n in NAMES}
        self.offline: dict[str, int] = dict.fromkeys(NAMES, 0)  # syncs left offline
        self.words = Words()
        self.serial = 0
        self.stepping = False  # a rule started and its invariants have not all passed yet
        self.session_folders: list[Path] = []  # Claude folders of worktree and subfolder sessions
        # the second clone (CLONE's): ``Machine.repos["app"]`` is the checkout whose folder writes the branch,
        # ``self.held_src`` the other one; what the held folder must hold, byte for byte, and the words in it
        # that join the fleet's when it becomes the writer
        self.held_src: Path | None = None
        self.held_snapshot: dict[str, bytes] = {}
        self.held_words: set[str] = set()
        self.forgotten: dict[str, str] = {}  # word -> the machine that ran `memd forget --string` on it
        self.confs: dict[str, Path] = {}
        self.started = time.perf_counter()
        self.rep = type(self).report
        self.rep.examples += 1
        self._keyless = self._key_file(None)
        self._keyed = self._key_file("test") if self.stub is not None else None

    # ---------------------------------------------------------------- setup

    def _key_file(self, key: str | None) -> Path:
        path = self.root / ("key" if key else "no-key")
        if key:
            path.write_text(key)
        return path

    @initialize()
    def setup(self) -> None:
        self.stepping = True
        first = self.machines["ma"]
        for key in self.PROJECTS:
            for i in range(4):
                w = self._word("ma")
                first.write(f"topic{i}.md", topic(f"topic{i}", _body(f"topic{i}") + w + "\n"), key=key)
            for m in self.machines.values():
                m.write(TEAM, TEAM_TEXT, key=key)
                for kind in self.SESSION_FOLDERS:
                    self.session_folders.append(add_session_folder(m, key, kind))
        for m in self.machines.values():
            self._sync(m)
        for m in self.machines.values():
            self._sync(m)
        if self.CLONE is not None:
            self._make_clone(self.machines[self.CLONE])

    def _make_clone(self, mach: Machine) -> None:
        """A second clone of app on mach, made after the first one shares the branch (so that one stays the
        writer): its own git root, its own memory folder (Claude Code's rule), a memory of its own."""
        from memd import layout

        main = mach.repos["app"]
        src = main.parent / f"{main.name}-copy"
        (src / ".git").mkdir(parents=True)
        shutil.copy(main / ".git" / "config", src / ".git" / "config")
        folder = mach.claude / "projects" / layout.sanitize(str(src))
        (folder / "memory").mkdir(parents=True)
        rec = {"type": "user", "cwd": str(src), "sessionId": str(uuid.uuid4()), "message": {"content": "hi"}}
        (folder / f"{uuid.uuid4()}.jsonl").write_text(json.dumps(rec) + "\n")
        self.held_src = src
        self._clone_write(0, 0, new=True)

    def _held_project(self) -> Any:
        from memd import layout

        assert self.held_src is not None and self.CLONE is not None
        return layout.resolve_project(str(self.held_src), self.machines[self.CLONE].claude)

    def _memd(self, mach: Machine, *args: str) -> tuple[int, str]:
        """The real command line, in this process, against mach's HOME (its Claude folder, its config)."""
        import contextlib
        import io

        from memd.cli import main

        conf = self.confs.get(mach.name)
        if conf is None:
            conf = self.confs[mach.name] = self.root / f"{mach.name}.toml"
            conf.write_text(f'[paths]\nstate_dir = "{mach.state_dir}"\n[sync]\nremote = "{self.remote}"\n'
                            f'machine = "{mach.name}"\ntimeout_s = 30.0\n')
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            rc = main([*args, "--claude-dir", str(mach.claude), "--config", str(conf)])
        return rc, buf.getvalue()

    def teardown(self) -> None:
        try:
            if not self.stepping:  # a step broke (hypothesis reports it): no quiescence over a broken world
                self._quiesce()
        finally:
            self.rep.seconds += time.perf_counter() - self.started
            if not self.keep_dirs:
                shutil.rmtree(self.root, ignore_errors=True)

    # ---------------------------------------------------------------- bookkeeping

    def _step(self, name: str) -> None:
        self.stepping = True
        self.rep.count(name)

    def _word(self, machine: str, kind: str = "tok") -> str:
        self.serial += 1
        w = f"{kind}-{self.serial}-{machine}"
        self.words.live.add(w)
        self.rep.words += 1
        return w

    def _remove_on_purpose(self, words: set[str], how: str, *, armed: bool = True) -> None:
        """Words removed on purpose; ``armed``: checked to stick at quiescence (see ``_fresh``)."""
        words = words & self.words.live
        self.words.live -= words
        self.rep.words_removed += len(words)
        for w in words:
            if armed:
                self.words.armed[w] = how

    def _fresh(self, m: str, key: str, rel: str, before: str) -> bool:
        """m changed rel over the version every machine and the remote hold (or never had): no write of
        another's is concurrent with it, so its removals must stick (else a true conflict may keep the
        other side's lines, the removed word among them, in a block: nothing lost, nothing to check)."""
        data = before.encode("utf-8")
        if remote_files(self.remote, key).get(rel, data) != data:
            return False
        return all(files_of(o, key).get(rel, data) == data for n, o in self.machines.items() if n != m)

    def _wrote(self, m: Machine, rel: str, before: str, after: str) -> None:
        """A write on m of rel: what m still held of a purposeful removal elsewhere, it wrote concurrently
        (a modify/delete keeps the file, the same lines changed on both sides keep both): disarmed."""
        self.words.disarm(tokens(before) | tokens(after))

    def _pick(self, files: list[str], i: int) -> str:
        return sorted(files)[i % len(files)]

    def _topics(self, m: Machine, key: str) -> dict[str, bytes]:
        return {k: v for k, v in files_of(m, key).items() if k != "MEMORY.md"}

    def _write(self, m: Machine, key: str, rel: str, text: str) -> None:
        before = m.read(rel, key=key) or ""
        m.write(rel, text, key=key)
        self._wrote(m, rel, before, text)

    # ---------------------------------------------------------------- rules: memory edits

    @rule(m=st.sampled_from(NAMES), key=st.sampled_from(("app",)), i=st.integers(0, 99), slot=st.integers(0, SLOTS - 1))
    def add_word(self, m: str, key: str, i: int, slot: int) -> None:
        mach = self.machines[m]
        self._step("add_word")
        files = list(self._topics(mach, key))
        if not files:  # an empty folder: the word goes in a new file
            self._new_file(m, key)
            return
        rel = self._pick(files, i)
        text = mach.read(rel, key=key) or ""
        lines = text.splitlines(keepends=True)
        marker = f"<!-- slot {slot} of "
        at = next((n for n, ln in enumerate(lines) if ln.startswith(marker)), len(lines) - 1)
        lines.insert(at + 1, self._word(m) + "\n")
        self._write(mach, key, rel, "".join(lines))

    @rule(m=st.sampled_from(NAMES), key=st.sampled_from(("app",)))
    def new_file(self, m: str, key: str) -> None:
        self._step("new_file")
        self._new_file(m, key)

    def _new_file(self, m: str, key: str) -> None:
        self.serial += 1
        name = f"new{self.serial}{m}"
        w = self._word(m)
        self._write(self.machines[m], key, f"{name}.md", topic(name, _body(name) + w + "\n"))

    @rule(m=st.sampled_from(NAMES), key=st.sampled_from(("app",)), i=st.integers(0, 99))
    def delete_file(self, m: str, key: str, i: int) -> None:
        mach = self.machines[m]
        files = list(self._topics(mach, key))
        self._step("delete_file")
        if len(files) < 5:  # a few at a time: the guard's share is tested elsewhere (test_sync_guards)
            return
        rel = self._pick(files, i)
        text = mach.read(rel, key=key) or ""
        (mach.mem(key) / rel).unlink()
        self._remove_on_purpose(tokens(text), f"{rel} deleted on {m}", armed=self._fresh(m, key, rel, text))

    @rule(m=st.sampled_from(NAMES), key=st.sampled_from(("app",)), i=st.integers(0, 99), j=st.integers(0, 99))
    def correct_word(self, m: str, key: str, i: int, j: int) -> None:
        mach = self.machines[m]
        self._step("correct_word")
        choices = [(rel, w) for rel, v in sorted(self._topics(mach, key).items())
                   for w in sorted(tokens(v.decode("utf-8", "replace")))]
        if not choices:
            return
        rel, old = choices[(i * 100 + j) % len(choices)]
        text = mach.read(rel, key=key) or ""
        new = self._word(m)
        self._write(mach, key, rel, text.replace(old, new))
        self._remove_on_purpose({old}, f"{old} corrected to {new} on {m}", armed=self._fresh(m, key, rel, text))

    # ---------------------------------------------------------------- rules: MEMORY.md

    def _notes(self, mach: Machine, key: str) -> list[str]:
        return [ln for ln in (mach.read("MEMORY.md", key=key) or "").splitlines() if ln.startswith(NOTE)]

    @rule(m=st.sampled_from(NAMES), key=st.sampled_from(("app",)),
          kind=st.sampled_from(("add", "correct", "remove", "grow")), i=st.integers(0, 99))
    def index_edit(self, m: str, key: str, kind: str, i: int) -> None:
        mach = self.machines[m]
        self._step(f"index_{kind}")
        text = mach.read("MEMORY.md", key=key)
        if text is None:
            return
        if kind == "grow":
            self._index_grow(mach, m, key, text, 150 + i)
            return
        notes = self._notes(mach, key)
        lines = text.splitlines(keepends=True)
        if kind == "add" or not notes:
            if len(notes) >= MAX_NOTES:
                return
            w = self._word(m, "idx")
            new = text.rstrip("\n") + f"\n{NOTE}{w}: a line of the user's in the index.\n"
            self._write(mach, key, "MEMORY.md", new)
            return
        line = notes[i % len(notes)]
        at = next(n for n, ln in enumerate(lines) if ln.rstrip("\n") == line)
        old = tokens(line)
        if kind == "correct":
            w = self._word(m, "idx")
            lines[at] = f"{NOTE}{w}: a line of the user's in the index, corrected.\n"
            how = f"index line {sorted(old)} corrected on {m}"
        else:
            del lines[at]
            how = f"index line {sorted(old)} removed on {m}"
        self._write(mach, key, "MEMORY.md", "".join(lines))
        self._remove_on_purpose(old, how, armed=self._fresh(m, key, "MEMORY.md", text))

    def _index_grow(self, mach: Machine, m: str, key: str, text: str, n: int) -> None:
        """Issue 33 findings 1-2: a session writes many long index lines at once, so the index nears or
        passes its budget on one machine, or only in the merge of two machines' growth. No sync may
        shorten it (every line's word is live: the checks after each sync and at quiescence see a cut)
        nor refuse it for its size, and the project must settle (quiescence: every machine the same)."""
        if text.count("\n") > 320:
            return
        lines = "".join(f"{NOTE}{self._word(m, 'idx')}: a long line of the user's in the index, written by a "
                        f"session, so that a few of them pass the budget Claude Code loads.\n" for _ in range(n))
        self._write(mach, key, "MEMORY.md", text.rstrip("\n") + "\n" + lines)

    # ---------------------------------------------------------------- rules: resets, undo

    @rule(m=st.sampled_from(NAMES), key=st.sampled_from(("app",)), removed=st.booleans())
    def reset(self, m: str, key: str, removed: bool) -> None:
        """The memory folder emptied (``removed=False``: its files deleted, a deletion like any other, held
        when it is a mass deletion) or removed (a new machine, an ``rm -rf``: "nothing here yet"); team/ is
        left to Claude Code."""
        mach = self.machines[m]
        self._step("reset_removed" if removed else "reset_emptied")
        here = text_of(files_of(mach, key))
        elsewhere = text_of(remote_files(self.remote, key)) + "".join(
            text_of(files_of(o, key)) for n, o in self.machines.items() if n != m)
        gone = (tokens(here) - tokens(elsewhere)) & self.words.live
        self.words.live -= gone  # never left this machine: the user's own loss
        self.rep.reset_losses += len(gone)
        # an intent of this machine's not yet sent is wiped with it: what the remote still holds comes back
        self.words.disarm(tokens(text_of(remote_files(self.remote, key))))
        if not removed:  # `rm memory/*` is a deletion of the user's: what the outgoing guard lets through is
            # removed on purpose (unarmed: a held push resolved with --forget brings it all back)
            self._remove_on_purpose(tokens(here), f"{m}'s folder emptied")
            self.words.disarm(tokens(here))
        folder = mach.mem(key)
        if removed:
            shutil.rmtree(folder, ignore_errors=True)
            mach.write(TEAM, TEAM_TEXT, key=key)  # Claude Code's team sync puts its folder back
        else:
            for p in sorted(folder.rglob("*"), reverse=True):
                if p.is_file() and p.relative_to(folder).parts[0] != "team":
                    p.unlink()

    @rule(m=st.sampled_from(NAMES), key=st.sampled_from(("app",)))
    def undo(self, m: str, key: str) -> None:
        """``memd undo`` of the newest run: local (finding 6) until resolved."""
        from memd.errors import MemdError
        from memd.maintenance import undo_project

        mach = self.machines[m]
        self._step("undo")
        before = files_of(mach, key)
        try:
            res, _ = undo_project(mach.project(key), mach.config, mach.state_dir, None, dry_run=False)
        except MemdError:  # no run yet
            return
        after = files_of(mach, key)
        removed = tokens(text_of(before)) - tokens(text_of(after))
        restored = tokens(text_of(after)) - tokens(text_of(before))
        self.words.disarm(restored | removed)
        if res.kept_local:
            self.rep.undos_kept_local += 1
        elsewhere = text_of(remote_files(self.remote, key)) + "".join(
            text_of(files_of(o, key)) for n, o in self.machines.items() if n != m)
        only_here = removed - tokens(elsewhere)
        # a word that was only here is gone on purpose now; one kept elsewhere stays live: --take-remote brings
        # it back, --keep-local may take it off the remote on the user's word (``_resolve_undo``)
        self._remove_on_purpose(only_here, f"undone on {m}")
        self.words.armed = {w: h for w, h in self.words.armed.items() if w not in only_here}

    @rule(m=st.sampled_from(NAMES), key=st.sampled_from(("app",)), send=st.booleans())
    def resolve_undo(self, m: str, key: str, send: bool) -> None:
        """``memd sync --keep-local`` (send the undo) or ``--take-remote`` (take the remote's back)."""
        from memd.sync import held

        mach = self.machines[m]
        if not held.load(mach.state_dir, mach.project(key).name).undone:
            return
        self._step("resolve_undo_keep_local" if send else "resolve_undo_take_remote")
        self._resolve_undo(m, key, send)

    def _resolve_undo(self, m: str, key: str, send: bool) -> None:
        from memd import history
        from memd.errors import MemdError
        from memd.sync import held

        mach = self.machines[m]
        # the undone files as they were before each undo: with --keep-local this machine's version wins and
        # their words may leave the remote (the user's removal; a word written elsewhere after the undo may
        # not); either way this machine's stale copy is merged again: a removal made elsewhere meanwhile may
        # meet it in a true conflict and come back in a block (nothing lost, nothing to check)
        before: set[str] = set()
        rows = held.load(mach.state_dir, mach.project(key).name).undone
        for commit in {str(u.get("before") or "") for r in rows.values() for u in r.get("undos", [])} - {""}:
            try:
                was = history.files_at(mach.state_dir, mach.project(key).name, commit)
            except MemdError:  # `memd forget` rewrote the history since the undo: the remote's version of the
                # undone files stands for what the undo reverted (what --keep-local may take off the remote)
                was = remote_files(self.remote, key)
            before |= tokens(text_of({r: was[r] for r in rows if r in was}))
        self.words.disarm(before | tokens(text_of(files_of(mach, key))))
        self._sync(mach, keep_local=send, take_remote=not send, allowed=before if send else set())


    # ---------------------------------------------------------------- rules: dreams

    @rule(m=st.sampled_from(NAMES), key=st.sampled_from(("app",)))
    def keyless_dream(self, m: str, key: str) -> None:
        """The dream with model work off: the index repair only."""
        mach = self.machines[m]
        self._step("keyless_dream")
        if not mach.mem(key).is_dir():
            return
        from memd.core.index import measure

        before = mach.read("MEMORY.md", key=key) or ""
        out = self._dream(mach, key, self._keyless)
        # an index over its budget (index_grow; a sync never shortens it) that safe moves cannot fit is
        # the product's `failed` for a dream without a model: condensing it is model work
        over = measure(before).level == "over"
        assert out.outcome in ("changed", "skipped", "unchanged", "refused") or (over and out.outcome == "failed"), out
        self._wrote(mach, "MEMORY.md", before, mach.read("MEMORY.md", key=key) or "")

    @precondition(lambda self: self.stub is not None)
    @rule(m=st.sampled_from(NAMES), key=st.sampled_from(("app",)), i=st.integers(0, 999))
    def model_dream(self, m: str, key: str, i: int) -> None:
        """A dream through the real SDK and the loopback stub: the model corrects one word (str_replace)."""
        mach = self.machines[m]
        self._step("model_dream")
        choices = [(rel, w) for rel, v in sorted(self._topics(mach, key).items())
                   for w in sorted(tokens(v.decode("utf-8", "replace")))]
        if not choices:
            return
        rel, old = choices[i % len(choices)]
        before = mach.read(rel, key=key) or ""
        new = self._word(m)
        s = self.stub
        s.script(s.message(s.memory("str_replace", path=f"/memories/{rel}", old_str=old, new_str=new)),
                 s.message(s.text(f"Corrected {old} in {rel}.")))
        try:
            out = self._dream(mach, key, self._keyed)
        finally:
            with s._lock:
                s._queue.clear()
        after = mach.read(rel, key=key) or ""
        if out.outcome == "changed" and new in after and old not in after:
            self.rep.model_dreams += 1
            self._wrote(mach, rel, before, after)
            self._remove_on_purpose({old}, f"{old} corrected to {new} by a dream on {m}",
                                    armed=self._fresh(m, key, rel, before))
        else:
            self.words.live.discard(new)  # never written

    def _dream(self, mach: Machine, key: str, key_file: Path | None) -> Any:
        from memd.config import DreamConfig, ModelConfig, replace
        from memd.jobs import JobContext
        from memd.jobs.dream import dream_project
        from memd.state import StateStore

        model = replace(ModelConfig(), api_key_file=str(key_file), max_retries=0, timeout_s=10.0,
                        base_url=self.stub.base_url if self.stub is not None else "")
        cfg = replace(mach.config, model=model, dream=replace(DreamConfig(), max_tool_turns=3, max_searches=0))
        with StateStore.open(mach.state_dir) as state:
            jc = JobContext(config=cfg, claude_dir=mach.claude, state_dir=mach.state_dir, state=state, force=True)
            return dream_project(jc, mach.project(key))

    @rule(m=st.sampled_from(NAMES), key=st.sampled_from(("app",)))
    def resolve_conflicts(self, m: str, key: str) -> None:
        mach = self.machines[m]
        self._step("resolve_conflicts")
        before = files_of(mach, key)
        resolve_blocks(mach, key)
        after = files_of(mach, key)
        for rel in set(before) | set(after):
            if before.get(rel) != after.get(rel):
                self._wrote(mach, rel, (before.get(rel) or b"").decode(), (after.get(rel) or b"").decode())

    # ---------------------------------------------------------------- rules: the second clone

    @precondition(lambda self: self.held_src is not None)
    @rule(i=st.integers(0, 99), slot=st.integers(0, SLOTS - 1), new=st.booleans())
    def clone_session_writes(self, i: int, slot: int, new: bool) -> None:
        """A session in the held clone writes memory, into ITS folder (as Claude Code does)."""
        self._step("clone_write")
        self._clone_write(i, slot, new=new)

    def _clone_write(self, i: int, slot: int, *, new: bool) -> None:
        assert self.CLONE is not None
        folder = self._held_project().memory_dir
        self.serial += 1
        w = f"tok-{self.serial}-{self.CLONE}"
        self.rep.words += 1
        self.rep.clone_words += 1
        files = sorted(k for k in dir_files(folder) if k != "MEMORY.md")
        if new or not files:
            name = f"clone{self.serial}"
            rel, text = f"{name}.md", topic(name, _body(name) + w + "\n")
        else:
            rel = files[i % len(files)]
            lines = (folder / rel).read_text(encoding="utf-8").splitlines(keepends=True)
            at = next((n for n, ln in enumerate(lines) if ln.startswith(f"<!-- slot {slot} of ")), len(lines) - 1)
            lines.insert(at + 1, w + "\n")
            text = "".join(lines)
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
        self.held_words.add(w)
        self.held_snapshot = dir_files(folder)

    @precondition(lambda self: self.held_src is not None)
    @rule(then_sync=st.booleans())
    def writer_switch(self, then_sync: bool) -> None:
        """`memd sync --writer HELD`: the held clone's folder syncs from now on, the other one is held. The new
        writer merges with the branch with no common base (nothing of the remote's counts as deleted); the
        words of the old one that never left it stay in it. ``then_sync``: the user syncs right away.
        (Named so that hypothesis, which orders rules by their number of arguments then by name, still
        starts an example with syncs, not with switches.)"""
        assert self.CLONE is not None and self.held_src is not None
        mach = self.machines[self.CLONE]
        self._step("switch_writer")
        from memd.sync import gitremote

        new = self._held_project()
        row = gitremote.seen(mach.state_dir).get(new.name)
        shared = isinstance(row, dict) and row.get("branch") == BRANCHES["app"]
        rc, out = self._memd(mach, "sync", "--writer", new.name)
        if not dir_files(new.memory_dir) and not shared:
            # the product's rule (memd.sync.identity): a folder that holds no memory of its own and never
            # synced the branch (a writer reset before its first sync, then switched away) is no participant:
            # `--writer` refuses it, in words, and nothing changes (the other folder stays the writer)
            assert rc != 0 and "holds no memory of its own" in out, (rc, out)
            self.rep.writer_refusals += 1
            return
        assert rc == 0 and f"{new.name}: syncs github.com/me/app" in out, out
        self.rep.writer_switches += 1
        mine, theirs = files_of(mach), dir_files(new.memory_dir)
        elsewhere = tokens(text_of(remote_files(self.remote)) + text_of(theirs)
                           + "".join(text_of(files_of(o)) for n, o in self.machines.items() if n != mach.name))
        stays = (tokens(text_of(mine)) - elsewhere) & self.words.live  # only in the old writer: held with it
        self.words.live -= stays
        self.words.live |= self.held_words
        # merged with no common base: every stale copy in the new writer comes back (no removal can stick)
        self.words.disarm(tokens(text_of(theirs)))
        # a removal the old writer made and never sent stays with it, held: the remote's copy stands (the long
        # tier's seed 11: a correction made on mc, offline, then `--writer` to the other folder "came back")
        self.words.disarm(tokens(text_of(remote_files(self.remote))) - tokens(text_of(mine)))
        self.held_words = stays
        self.held_src, mach.repos["app"] = mach.repos["app"], self.held_src
        self.held_snapshot = mine
        if then_sync:
            self._sync(mach)

    # ---------------------------------------------------------------- rules: memd forget --string

    @rule(m=st.sampled_from(NAMES), i=st.integers(0, 999), go=st.integers(0, 3))
    def forget_word(self, m: str, i: int, go: int) -> None:
        """`memd forget PROJECT --string WORD --apply` with sync on (a quarter of the draws: it rewrites the
        remote's branch and every machine's history): taken out here, on the remote, and by every other
        machine at its next sync; no other word lost."""
        if go:
            return
        mach = self.machines[m]
        self._step("forget")
        # a word the held clone's folder holds too stays there (memd never touches a held folder) until that
        # folder is made the writer: then it applies the record before it sends anything (the remote is checked
        # after every sync, its files and history at quiescence)
        choices = sorted(tokens(text_of(files_of(mach))) & self.words.live)
        if not choices:
            return
        w = choices[i % len(choices)]
        before = files_of(mach)
        rc, out = self._memd(mach, "forget", mach.project().name, "--string", w, "--apply")
        assert rc == 0, out
        assert "sync remote: " in out and "failed" not in out and "refused" not in out, out
        self.rep.forgets += 1
        self.forgotten[w] = m
        self.words.live.discard(w)
        self.held_words.discard(w)
        self.words.armed.pop(w, None)
        self.rep.words_removed += 1
        after = files_of(mach)
        self._wrote_all(mach, before, after)
        assert w not in text_of(after), f"{m}: memd forget left {w} in its files: {out}"
        assert not remote_holds(self.remote, w), f"{m}: memd forget left {w} on the remote: {out}"

    def _wrote_all(self, mach: Machine, before: dict[str, bytes], after: dict[str, bytes]) -> None:
        for rel in set(before) | set(after):
            if before.get(rel) != after.get(rel):
                self._wrote(mach, rel, (before.get(rel) or b"").decode(), (after.get(rel) or b"").decode())

    # ---------------------------------------------------------------- rules: syncs, offline spells

    @rule(m=st.sampled_from(NAMES))
    def sync(self, m: str) -> None:
        self._step("sync")
        self._sync(self.machines[m])

    @rule(m=st.sampled_from(NAMES))
    def sync_again(self, m: str) -> None:  # syncs are what a fleet mostly does: twice the weight
        self._step("sync")
        self._sync(self.machines[m])

    @rule(m=st.sampled_from(NAMES), syncs=st.integers(1, 6))
    def offline_spell(self, m: str, syncs: int) -> None:
        """m's remote is unreachable for its next ``syncs`` syncs (a train, a flight, a VPN down)."""
        self._step("offline_spell")
        self.offline[m] = syncs

    def _sync(self, mach: Machine, allowed: set[str] | frozenset[str] = frozenset(), **kw: Any) -> Any:
        """One sync of mach, its invariants checked; ``allowed``: words it may take off the remote on the
        user's word (``--keep-local`` of an undo)."""
        from memd import apply as ap
        from memd.core import conflict as cblock
        from memd.core import guard
        from memd.sync import held

        before = {k: remote_files(self.remote, k) for k in self.PROJECTS}
        offline = self.offline[mach.name] > 0
        self.offline[mach.name] = max(0, self.offline[mach.name] - 1)
        keys = () if self.SESSION_FOLDERS else self.PROJECTS
        res = mach.sync(*keys, remote=self.nowhere if offline else None, **kw)
        self.rep.syncs += 1
        lines = held.status_lines(mach.state_dir)
        for o in res.outcomes:
            self.rep.outcomes[o.outcome] = self.rep.outcomes.get(o.outcome, 0) + 1
            self.rep.failed_syncs += o.outcome == "failed"
            if o.outcome == "refused" and f"sync: {o.project}:" not in lines:
                self.rep.silent_holds.append(f"{mach.name}: {o.project}: {o.message}")
        assert not self.rep.silent_holds, self.rep.silent_holds
        limits = ap.limits_of(mach.config)
        for key in self.PROJECTS:
            after = remote_files(self.remote, key)
            b_top = {k: v for k, v in before[key].items() if k != "MEMORY.md"}
            a_top = {k: v for k, v in after.items() if k != "MEMORY.md"}
            if b_top and a_top != b_top and not kw.get("push_deletions"):
                breach = guard.loss_reasons(b_top, a_top, limits, subject=f"{mach.name}'s push")
                self.rep.guard_breaches += breach
                assert not breach, (breach, [o.message for o in res.outcomes])
            on_remote = tokens(text_of(after))
            self.words.ever_shared |= on_remote
            gone = (self.words.ever_shared & self.words.live) - on_remote
            if gone & allowed:
                self.words.live -= gone & allowed
                self.rep.words_removed += len(gone & allowed)
                gone -= allowed
            if gone:
                self.rep.lost_on_remote += sorted(gone)
                raise AssertionError(f"{mach.name}'s sync took live words off the remote: {sorted(gone)[:10]} "
                                     f"{[o.message for o in res.outcomes]}")
            self.rep.blocks_seen += sum(cblock.count(v.decode("utf-8", "replace")) for v in after.values())
        if self.held_src is not None and mach.name == self.CLONE:
            self._clone_held(mach, lines)
        back = sorted(w for w in self.forgotten if remote_holds(self.remote, w))
        if back:
            self.rep.forgotten_left += [f"{w} on the remote after {mach.name}'s sync" for w in back]
            raise AssertionError(f"{mach.name}'s sync sent forgotten words back to the remote: {back}")
        return res

    def _clone_held(self, mach: Machine, lines: str) -> None:
        """After a sync of the machine with two clones: the held one never raced the writer (none of its
        words reached the branch) and it has its status line."""
        from memd.sync import gitremote

        held_p = self._held_project()
        raced = sorted(self.held_words & tokens(text_of(remote_files(self.remote))))
        if raced:
            self.rep.clone_races += raced
            raise AssertionError(f"the held clone {held_p.name}'s words reached the branch: {raced[:10]}")
        row = gitremote.seen(mach.state_dir).get(held_p.name)
        shared = isinstance(row, dict) and row.get("branch") == BRANCHES["app"]
        if (dir_files(held_p.memory_dir) or shared) and f"sync: {held_p.name}: held" not in lines:
            self.rep.silent_holds.append(f"{mach.name}: {held_p.name} (the held clone)")
            raise AssertionError(f"{mach.name}: the held clone {held_p.name} has no status line: {lines!r}")

    # ---------------------------------------------------------------- invariants, every step

    @invariant()
    def memd_leaves_team_and_no_file_of_its_own(self) -> None:
        for m in self.machines.values():
            for key in self.PROJECTS:
                folder = m.mem(key)
                if not folder.is_dir():
                    continue
                team = folder / TEAM
                assert not team.exists() or team.read_text() == TEAM_TEXT, f"{m.name}: memd wrote in team/"
                stray = [str(p.relative_to(folder)) for p in folder.rglob("*")
                         if p.is_file() and (p.suffix != ".md" or p.name.startswith("."))]
                assert not stray, f"{m.name}: files of memd's own in the memory folder: {stray}"

    @invariant()
    def sessions_elsewhere_are_no_writers(self) -> None:
        """A worktree's or a monorepo subfolder's session folder has no memory of its own (Claude Code keeps
        it with the main checkout): sync never makes it a participant, never writes a memory folder there."""
        made = [str(f) for f in self.session_folders if (f / "memory").exists()]
        assert not made, f"memd made a memory folder in a session folder with none: {made}"

    @invariant()
    def the_held_clone_is_left_as_written(self) -> None:
        """memd never writes in the held clone's folder: its words stay there, byte for byte."""
        if self.held_src is None:
            return
        now = dir_files(self._held_project().memory_dir)
        if now != self.held_snapshot:
            self.rep.clone_races.append("the held clone's folder changed")
            gone = sorted(tokens(text_of(self.held_snapshot)) - tokens(text_of(now)))
            raise AssertionError(f"memd changed the held clone's folder: words gone {gone[:10]}, files "
                                 f"{sorted(set(now) ^ set(self.held_snapshot))}")

    @invariant()
    def what_is_held_is_said(self) -> None:
        from memd.sync import held

        for m in self.machines.values():
            lines = held.status_lines(m.state_dir)
            for name, h in held.load_all(m.state_dir).items():
                if not h.empty and f"sync: {name}:" not in lines:
                    self.rep.silent_holds.append(f"{m.name}: {name}")
                    raise AssertionError(f"{m.name}: {name} is held without a status line")
        self.stepping = False  # hypothesis runs invariants in the order they are defined: this one is last

    # ---------------------------------------------------------------- quiescence

    def _resolve_holds(self) -> None:
        """The user resolves what is held, as the status lines say."""
        from memd.sync import held

        for n, m in self.machines.items():
            for key in self.PROJECTS:
                h = held.load(m.state_dir, m.project(key).name)
                if h.undone:  # the remote's version back (nothing of anyone's is removed)
                    self._resolve_undo(n, key, send=False)
                h = held.load(m.state_dir, m.project(key).name)
                if h.files:  # a file of the remote refused here: this machine's version goes out
                    self.words.disarm(tokens(text_of(files_of(m, key))))
                    self._sync(m, keep_local=True)
                h = held.load(m.state_dir, m.project(key).name)
                if h.project:  # a held push: take the remote's memory back. With no common base every
                    # difference is a conflict: this machine's lines stay, the remote's differing lines go
                    # in a block (a removal this machine made while held meets the remote's old lines)
                    self.words.disarm(tokens(text_of(files_of(m, key))) | tokens(text_of(remote_files(self.remote,
                                                                                                        key))))
                    forget_shared(m, key)

    def _quiesce(self) -> None:
        from memd.core import conflict as cblock
        from memd.sync import evidence, held

        for n in NAMES:
            self.offline[n] = 0
        finals: list[dict[str, bytes]] = []
        for rnd in range(8):
            self._resolve_holds()
            before = [files_of(m, k) for m in self.machines.values() for k in self.PROJECTS]
            for m in self.machines.values():
                self._sync(m)
            finals = [files_of(m, k) for m in self.machines.values() for k in self.PROJECTS]
            self.rep.quiet_rounds = max(self.rep.quiet_rounds, rnd + 1)
            if before == finals and all(f == finals[0] for f in finals):
                break
        converged = all(f == finals[0] for f in finals)
        still = self._still() if converged else []
        self.rep.converged += converged
        self.rep.not_converged += not converged
        # each memory folder records a conflict once (one record, one event), never again at a later sync. The
        # id hashes (file, this side, the other side), not the folder: two machines (or the held clone's folder
        # and the writer's) that held the same text and met the same other version each keep the other side in
        # their own file and are each told (issue 33: every disagreement is said on both machines). That is one
        # conflict met in two places, counted apart (``met_twice``), not a duplicate.
        rows = [(m.name, c) for m in self.machines.values() for k in self.PROJECTS
                for c in evidence.load(m.state_dir, m.project(k).name)]
        if self.held_src is not None and self.CLONE is not None:  # what the held clone met while it wrote
            rows += [(self.CLONE, c) for c in evidence.load(self.machines[self.CLONE].state_dir,
                                                          self._held_project().name)]
        events = sum(len(m.events.named("sync.conflict")) for m in self.machines.values())
        ids = [(n, c.project, c.id) for n, c in rows]
        dups = sorted(f"{n}: {p}: {i}" for n, p, i in set(ids) if ids.count((n, p, i)) > 1)
        self.rep.conflicts += len(rows)
        self.rep.conflict_events += events
        self.rep.duplicate_conflicts += len(ids) - len(set(ids))
        self.rep.met_twice += len(rows) - len({c.id for _, c in rows})
        self.rep.met_twice_where += [f"{c.file} {c.id} on {n}'s {c.project[-12:]} from {c.machine}"
                                     for n, c in rows if sum(c.id == d.id for _, d in rows) > 1]
        text = text_of(finals[0]) if finals else ""
        self.rep.open_blocks += cblock.count(text)
        lost = sorted(self.words.live - tokens(text))
        came_back = sorted(w for w in self.words.armed if w in tokens(text))
        self.rep.lost += lost
        self.rep.came_back += [f"{w} ({self.words.armed[w]})" for w in came_back]
        self.rep.armed += len(self.words.armed)
        # the held clone's lines stay (holding it is the user's choice until `memd sync --writer`; what an undo
        # kept in it while it was the writer stays kept with it)
        clone = f"sync: {self._held_project().name}: " if self.held_src is not None else "\0"
        leftover = [(m.name, lines) for m in self.machines.values()
                    if (lines := "".join(ln + "\n" for ln in held.status_lines(m.state_dir).splitlines()
                                         if not ln.startswith(clone)))]
        left = self._forgotten_left()
        assert converged, [sorted(f) for f in finals]
        assert not still, f"at quiescence a project keeps committing: {still[:10]}"
        assert not lost, f"words lost: {lost[:10]}"
        assert not came_back, f"removals that did not stick: {self.rep.came_back[-10:]}"
        assert not dups and events == len(rows), (dups, len(rows), events)
        assert not leftover, leftover
        assert not left, f"forgotten words still held: {left[:10]}"

    def _commits(self) -> dict[str, str | None]:
        """Every commit head a sync may move: the remote's branches, each machine's refs in its sync
        repository (what it made, what it shared), the memd history of each of its memory folders."""
        from dulwich.repo import Repo

        from memd import history, layout
        from memd.sync import gitremote

        out: dict[str, str | None] = {}
        repo = Repo(self.remote.removeprefix("file://"))
        try:
            out |= {f"remote {k.decode()}": v.decode() for k, v in repo.get_refs().items()}
        finally:
            repo.close()
        for m in self.machines.values():
            if gitremote.repo_path(m.state_dir).exists():
                r = gitremote.open_repo(m.state_dir)
                try:
                    out |= {f"{m.name} {k.decode()}": v.decode() for k, v in r.get_refs().items()}
                finally:
                    r.close()
            for p in layout.list_projects(m.claude):
                heads = [e.commit for e in history.log(m.state_dir, p.name, limit=1)]
                out[f"{m.name} history of {p.name}"] = heads[0] if heads else None
        return out

    def _still(self) -> list[str]:
        """The new invariant of issue 33: at quiescence no project keeps committing. Two syncs of every
        machine in a row, with nothing new anywhere, make no commit: not on the remote, not in any
        machine's sync repository, not in any memd history; and each says so (no ``changed``)."""
        was = self._commits()
        moved: list[str] = []
        for _ in range(2):
            for m in self.machines.values():
                res = self._sync(m)
                moved += [f"{m.name}: {o.project}: {o.outcome}: {o.message}" for o in res.outcomes
                          if o.outcome in ("changed", "partial")]
        now = self._commits()
        moved += [f"{k}: {was.get(k)} -> {now.get(k)}" for k in sorted(set(was) | set(now)) if was.get(k) != now.get(k)]
        self.rep.still_committing += bool(moved)
        return moved

    def _forgotten_left(self) -> list[str]:
        """Where a forgotten word still is: a machine's files (the writer's; a held folder is memd's to leave
        alone), the memd history of that folder, the remote."""
        left: list[str] = []
        for w, by in sorted(self.forgotten.items()):
            where = [m.name for m in self.machines.values() if w in text_of(files_of(m))]
            where += [f"{m.name}'s history" for m in self.machines.values()
                      if history_holds(m.state_dir, m.project().name, w)]
            where += ["the remote"] * bool(remote_holds(self.remote, w))
            left += [f"{w} (forgotten on {by}) in {', '.join(where)}"] if where else []
        self.rep.forgotten_left += left
        return left


# --------------------------------------------------------------------------- campaigns (the long tier)


def run_campaign(steps: int, seed: int, *, per_example: int = 100, model: bool = True) -> tuple[FleetReport, list[str]]:
    """Run the fleet until at least ``steps`` rule steps ran: examples of ``per_example`` steps each
    (hypothesis' generation with seeds ``seed``, ``seed + 1``...; no shrinking: the failing program is
    printed as hypothesis ran it). Returns the report and the failures (empty: every invariant held).
    The caller isolates git from the user's config (``bench_sync._isolate``)."""
    from hypothesis import HealthCheck, Phase, settings
    from hypothesis import seed as with_seed
    from hypothesis.stateful import get_state_machine_test

    from tests.plugins.stub_api import StubAPI

    stub = StubAPI() if model else None

    class CampaignFleet(Fleet):
        report = FleetReport()

    CampaignFleet.stub = stub
    failures: list[str] = []
    try:
        k = 0
        while CampaignFleet.report.steps < steps:
            # hypothesis' first example is its simplest (one rule over and over); the rest are random
            left = -(-(steps - CampaignFleet.report.steps) // per_example) + 1
            cfg = settings(max_examples=left, stateful_step_count=per_example, deadline=None, database=None,
                           phases=[Phase.generate], suppress_health_check=list(HealthCheck), print_blob=False)
            test = with_seed(seed + k)(get_state_machine_test(CampaignFleet, settings=cfg))
            try:
                test()
            except Exception as e:  # an invariant broke: hypothesis printed the program that broke it
                notes = "\n".join(getattr(e, "__notes__", []))
                failures.append(f"seed {seed + k}: {type(e).__name__}: {str(e)[:2000]}\n{notes}")
            k += 1
    finally:
        if stub is not None:
            stub.close()
    return CampaignFleet.report, failures
