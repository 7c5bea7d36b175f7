"""A simulated fleet (issue 15): three machines sync one project through one remote while each edits
memory, dreams (scripted, no model) and goes offline at random. Used by tests/test_sync_fleet.py (a
short campaign in CI) and bench/bench_sync.py (the long one).

Edits insert a unique token line after one of a file's slot markers (two machines inserting after
the same marker conflict; after different ones they merge), or add a new file. A dream reconciles
the conflicts handed to it (``memd.sync.evidence.for_dream``/``settle``): it adds the other side's
lines the file lacks. At the end every machine is online and syncs until quiet; then:
- every machine holds the same topic files;
- every token is in those files, or in a conflict's kept "other side" (nothing lost unseen);
- every conflict was surfaced exactly once (one record, one ``sync.conflict`` event, one machine).
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
    converged: bool = False
    quiet_rounds: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)


def _body(name: str) -> str:
    return "".join(f"<!-- slot {k} of {name} -->\n" for k in range(SLOTS))


def scripted_dream(m: Machine) -> bool:
    """A dream without a model: reconcile each open conflict by adding the other side's missing lines."""
    from memd import apply as ap
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


def run_fleet(root: Path, remote: str, ops: int, seed: int, *, machines: int = 3) -> FleetReport:
    from memd.sync import evidence

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

    def sync(m: Machine) -> None:
        res = m.sync("app", remote=nowhere if offline[m.name] else None)
        rep.syncs += 1
        for o in res.outcomes:
            rep.outcomes[o.outcome] = rep.outcomes.get(o.outcome, 0) + 1
            rep.failed_syncs += o.outcome == "failed"

    for n in range(ops):
        m = rng.choice(fleet)
        roll = rng.random()
        rep.ops += 1
        if roll < 0.45:
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
        elif roll < 0.50:
            token = f"token-{n}-{m.name}"
            m.write(f"new{n}.md", topic(f"new{n}", _body(f"new{n}") + token + "\n"))
            tokens.append(token)
            rep.edits += 1
        elif roll < 0.85:
            sync(m)
        elif roll < 0.90:
            rep.dreams += scripted_dream(m)
        else:
            offline[m.name] = not offline[m.name]
            rep.offline_flips += 1

    for m in fleet:
        offline[m.name] = False
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
    kept = "".join(v.decode() for v in final[0].values()) + "".join(c.remote for _, c in rows)
    rep.lost = [t for t in tokens if t not in kept]
    return rep


def summary(rep: FleetReport) -> dict[str, Any]:
    return {"ops": rep.ops, "edits": rep.edits, "syncs": rep.syncs, "failed_syncs": rep.failed_syncs,
            "dreams": rep.dreams, "offline_flips": rep.offline_flips, "conflicts": rep.conflicts,
            "conflict_events": rep.conflict_events, "duplicates": rep.duplicate_conflicts, "lost": len(rep.lost),
            "converged": rep.converged, "quiet_rounds": rep.quiet_rounds, "outcomes": rep.outcomes}
