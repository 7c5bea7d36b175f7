"""A simulated fleet (issue 15): three machines sync one project through one remote while each edits
memory, dreams (scripted, no model) and goes offline at random. Used by tests/test_sync_fleet.py (a
short campaign in CI) and bench/bench_sync.py (the long one).

Edits insert a unique token line after one of a file's slot markers (two machines inserting after
the same marker conflict; after different ones they merge), or add a new file. A dream reconciles
the conflicts handed to it (``memd.sync.evidence.for_dream``/``settle``): it adds the other side's
lines the file lacks and resolves the conflict blocks (issue 21: their marker lines removed, the lines
between kept). At the end every machine is online and syncs until quiet; then:
- every machine holds the same topic files;
- every token is in those files, a conflict block's lines included (issue 21: a conflict keeps both
  sides' words visible in the file; a conflict's record in memd's state no longer counts);
- every conflict was surfaced exactly once (one record, one ``sync.conflict`` event, one machine).

Issue 21 adds resets (a machine's memory folder removed: "nothing here yet", it takes the remote's
memory back; tokens that never left it are the user's own loss and leave the count) and three
invariants checked after every sync, not only at the end:
- the outgoing guard: no push (none says ``--push-deletions``) deletes or shrinks the remote's memory
  past the guard's shares (the remote's head before and after, through ``memd.core.guard.loss_reasons``);
- nothing lost on the remote: every token some push put there is still there, or in a conflict's kept side;
- a refused project has a ``sync`` line in status (``memd.sync.held.status_lines``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.plugins.sync import Machine, topic

SLOTS = 6


@dataclass
class FleetReport:
    ops: int = 0
    edits: int = 0
    syncs: int = 0
    failed_syncs: int = 0
    dreams: int = 0
    offline_flips: int = 0
    conflicts: int = 0
    conflict_events: int = 0
    duplicate_conflicts: int = 0
    lost: list[str] = field(default_factory=list)
    in_blocks: int = 0  # tokens inside a conflict block at the end (visible, not yet resolved)
    open_blocks: int = 0  # conflict blocks left in the final files
    resets: int = 0
    guard_breaches: list[str] = field(default_factory=list)  # pushes past the outgoing guard
    silent_holds: int = 0  # refused outcomes with no status line
    lost_on_remote: list[str] = field(default_factory=list)  # tokens some push carried, then gone unseen
    trace: list[str] = field(default_factory=list)
    converged: bool = False
    quiet_rounds: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)


def _body(name: str) -> str:
    return "".join(f"<!-- slot {k} of {name} -->\n" for k in range(SLOTS))


def scripted_dream(m: Machine) -> bool:
    """A dream without a model: reconcile each open conflict by adding the other side's missing lines."""
    from memd import apply as ap
    from memd.core import conflict as cblock
    from memd.sync import evidence

    project = m.project()
    rows = evidence.open_conflicts(m.state_dir, project.name)
    if not rows:
        return False
    ids = [c.id for c in rows]

    def edit(ws: ap.Workspace) -> ap.Edits:
        st = ws.get()
        for c in rows:
            path = st.root / c.file
            if not path.exists():
                continue
            text = path.read_text(encoding="utf-8")
            if cblock.BEGIN in text:  # the block resolved: its words kept, its markers gone
                text = "".join(ln for ln in text.splitlines(keepends=True) if not cblock.is_marker(ln))
                path.write_text(text, encoding="utf-8")
            have = set(text.splitlines())
            extra = [ln for ln in c.remote.splitlines() if ln.strip() and ln not in have]
            if extra:
                path.write_text(text.rstrip("\n") + "\n" + "\n".join(extra) + "\n", encoding="utf-8")
        return ap.Edits(note="reconciled sync conflicts")

    res = ap.run(project, edit, state_dir=m.state_dir, job="dream", run_id=ap.new_run_id("dream", 0.0),
                 config=m.config, review=False)
    if res.verdict in (ap.Verdict.APPLIED, ap.Verdict.UNCHANGED):
        evidence.settle(m.state_dir, project.name, ids)
    return True


def remote_topics(remote: str) -> dict[str, bytes]:
    """The topic files of the remote's branch, read straight from the bare repository."""
    from dulwich.repo import Repo

    from memd.sync import gitremote

    repo = Repo(remote.removeprefix("file://"))
    try:
        try:
            head = repo.refs[b"refs/heads/memory/github.com/me/app"]
        except KeyError:
            return {}
        files = gitremote.files_of(repo, head.decode("ascii"), 10**7).files
    finally:
        repo.close()
    return {k: v for k, v in files.items() if k != "MEMORY.md"}


def forget_shared(m: Machine) -> None:
    """`memd sync --forget` for the fleet's one project."""
    from memd.sync import gitremote, held

    repo = gitremote.open_repo(m.state_dir)
    try:
        gitremote.forget(repo, "memory/github.com/me/app")
    finally:
        repo.close()
    held.forget(m.state_dir, m.project().name)


def run_fleet(root: Path, remote: str, ops: int, seed: int, *, machines: int = 3, debug: bool = False) -> FleetReport:
    import shutil

    from memd import apply as ap
    from memd.core import guard
    from memd.sync import evidence, held

    rng = random.Random(seed)
    rep = FleetReport()
    fleet = [Machine(root, f"m{chr(ord('a') + i)}", remote) for i in range(machines)]
    offline = {m.name: False for m in fleet}
    nowhere = "file://" + str(root / "offline-nowhere.git")
    tokens: list[str] = []
    first = fleet[0]
    for i in range(4):
        first.write(f"topic{i}.md", topic(f"topic{i}", _body(f"topic{i}")))
    for m in fleet:
        m.sync("app")

    limits = ap.limits_of(first.config)
    shared_tokens: set[str] = set()

    def sync(m: Machine) -> None:
        before = remote_topics(remote)
        res = m.sync("app", remote=nowhere if offline[m.name] else None)
        after = remote_topics(remote)
        rep.syncs += 1
        for o in res.outcomes:
            rep.outcomes[o.outcome] = rep.outcomes.get(o.outcome, 0) + 1
            rep.failed_syncs += o.outcome == "failed"
            if o.outcome == "refused" and not held.status_lines(m.state_dir):
                rep.silent_holds += 1
        if debug:
            rep.trace.append(f"  {m.name} sync: {[(o.outcome, o.message[:300]) for o in res.outcomes]}")
        if before and after != before:
            rep.guard_breaches += guard.loss_reasons(before, after, limits, subject=f"{m.name}'s push")
        text = "".join(v.decode() for v in after.values())
        shared_tokens.update(t for t in tokens if t in text)
        gone = [t for t in shared_tokens if t not in text]
        if gone:
            kept = "".join(c.remote + c.local for f in fleet for c in evidence.load(f.state_dir, f.project().name))
            for t in gone:
                if t not in kept and t not in rep.lost_on_remote:
                    rep.lost_on_remote.append(t)
                    rep.trace.append(f"op {rep.ops}: {m.name}'s sync took {t} off the remote "
                                     f"{[o.message for o in res.outcomes]}")

    for n in range(ops):
        m = rng.choice(fleet)
        roll = rng.random()
        rep.ops += 1
        if debug:
            rep.trace.append(f"op {rep.ops}: {m.name} roll {roll:.2f} offline {offline[m.name]}")
        if roll < 0.45 and m.topics():
            files = sorted(m.topics())
            rel = rng.choice(files)
            text = m.read(rel) or ""
            marker = f"<!-- slot {rng.randrange(SLOTS)} of "
            lines = text.splitlines(keepends=True)
            at = next((i for i, ln in enumerate(lines) if ln.startswith(marker)), len(lines) - 1)
            token = f"token-{n}-{m.name}"
            lines.insert(at + 1, token + "\n")
            m.write(rel, "".join(lines))
            tokens.append(token)
            rep.edits += 1
        elif roll < 0.50 or roll < 0.45:  # a new file (also what an edit of an empty folder becomes)
            token = f"token-{n}-{m.name}"
            m.write(f"new{n}.md", topic(f"new{n}", _body(f"new{n}") + token + "\n"))
            tokens.append(token)
            rep.edits += 1
        elif roll < 0.85:
            sync(m)
        elif roll < 0.88:
            rep.dreams += scripted_dream(m)
        elif roll < 0.90:  # a reset: the memory folder removed; what never left the machine is gone with it
            on_remote = "".join(v.decode() for v in remote_topics(remote).values())
            here = "".join(v.decode() for v in m.topics().values())
            tokens[:] = [t for t in tokens if t in on_remote or t not in here]
            shutil.rmtree(m.mem(), ignore_errors=True)
            rep.trace.append(f"op {rep.ops}: {m.name} reset")
            rep.resets += 1
        else:
            offline[m.name] = not offline[m.name]
            rep.offline_flips += 1

    for m in fleet:
        offline[m.name] = False
        if held.load(m.state_dir, m.project().name).project:  # the user resolves a held push: takes the
            forget_shared(m)                                   # remote's memory back (`memd sync --forget`)
    for rnd in range(8):  # the quiet period: everyone online, no edits
        before = [m.topics() for m in fleet]
        for m in fleet:
            sync(m)
        rep.quiet_rounds = rnd + 1
        after = [m.topics() for m in fleet]
        if before == after and all(t == after[0] for t in after):
            break
    final = [m.topics() for m in fleet]
    rep.converged = all(t == final[0] for t in final)

    rows = [(m.name, c) for m in fleet for c in evidence.load(m.state_dir, m.project().name)]
    rep.conflicts = len(rows)
    rep.conflict_events = sum(len(m.events.named("sync.conflict")) for m in fleet)
    ids = [c.id for _, c in rows]
    rep.duplicate_conflicts = len(ids) - len(set(ids))
    from memd.core import conflict as cblock

    kept = "".join(v.decode() for v in final[0].values())
    rep.lost = [t for t in tokens if t not in kept]
    inside: set[str] = set()
    for v in final[0].values():
        lines = v.decode().split("\n")
        for b in cblock.blocks(v.decode()):
            inside.update(t for t in tokens if any(t in ln for ln in lines[b.line:(b.end or len(lines)) - 1]))
    rep.in_blocks = len(inside)
    rep.open_blocks = sum(cblock.count(v.decode()) for v in final[0].values())
    return rep


def summary(rep: FleetReport) -> dict[str, Any]:
    return {"ops": rep.ops, "edits": rep.edits, "syncs": rep.syncs, "failed_syncs": rep.failed_syncs,
            "dreams": rep.dreams, "offline_flips": rep.offline_flips, "conflicts": rep.conflicts,
            "conflict_events": rep.conflict_events, "duplicates": rep.duplicate_conflicts, "lost": len(rep.lost),
            "in_blocks": rep.in_blocks, "open_blocks": rep.open_blocks,
            "converged": rep.converged, "quiet_rounds": rep.quiet_rounds, "outcomes": rep.outcomes,
            "resets": rep.resets, "guard_breaches": len(rep.guard_breaches), "silent_holds": rep.silent_holds,
            "lost_on_remote": len(rep.lost_on_remote)}
