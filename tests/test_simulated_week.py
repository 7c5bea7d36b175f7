"""A simulated week on an injected clock: the real Daemon and Worker in-process under a ManualClock,
the jobs through the real SDK against the loopback stub, no sleeping (issue 12, "a simulated week").

Seven nights, Monday 08:00 to the next Monday 08:00 (UTC), ticking the loop every 15 minutes:
- sessions every day: project A two a day, B one a day, C none (its memory folder only);
- dreams once a night at 03:00, each project only past its gates (24 hours, 2 sessions since its last
  consolidation (``dream.min_sessions = 2``), no active session): A every night, B every other
  night, C never; the scheduled dream job once a night, never twice;
- catch-ups every 2 hours (84 slots), each extracting the sessions that went quiet since the last;
- the check-in at 07:30 each morning: its report counts exactly the runs since the previous one and
  names the night's dreams, with what they changed; then it prunes the run log (skipped rows after 48 h).
"""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memd.clock import ManualClock
from memd.config import Config, DaemonConfig, DreamConfig, ModelConfig, replace
from memd.daemon.server import Daemon
from tests.plugins.daemon import Recorder
from tests.plugins.stub_api import Reply, StubAPI


def _next_monday() -> datetime:
    """08:00 UTC of a Monday at least a day ahead of the machine's clock: the files the jobs write
    (the ``.consolidate-lock``, whose mtime is Claude Code's "last consolidation") carry real mtimes,
    which must not be newer than the injected clock."""
    day = datetime.now(UTC).replace(hour=8, minute=0, second=0, microsecond=0) + timedelta(days=2)
    return day + timedelta(days=(7 - day.weekday()) % 7)


START = _next_monday()
A, B, C = "-home-dev-a", "-home-dev-b", "-home-dev-c"
SESSION_HOURS = {A: (10, 16), B: (13,), C: ()}  # with dream.min_sessions = 2


def topic(name: str) -> str:
    return f"---\nname: {name}\ndescription: {name}\ntype: project\n---\n{name} body\n"


class Week:
    def __init__(self, tmp_path: Path, stub: StubAPI) -> None:
        self.claude = tmp_path / "claude"
        self.stub = stub
        self.clock = ManualClock(START, UTC)
        self.rec = Recorder()
        config = Config(model=replace(ModelConfig(), base_url=stub.base_url, max_retries=0, timeout_s=10.0),
                        dream=replace(DreamConfig(), min_sessions=2),
                        daemon=replace(DaemonConfig(), isolate_jobs=False))  # the jobs read this clock
        self.daemon = Daemon(config=config, load_config=lambda: config, claude_dir_for=lambda c: self.claude,
                             state_dir=tmp_path / "state", tz=UTC, clock=self.clock, log=self.rec)
        self.daemon.open()
        st = self.daemon.state
        st.set("schedule.dream.pick", json.dumps({"minute": 3 * 60, "window": "01:00-04:59"}))
        st.set("schedule.checkin.pick", json.dumps({"minute": 7 * 60 + 30, "window": "07:00-08:59"}))
        for name in SESSION_HOURS:
            mem = self.claude / "projects" / name / "memory"
            mem.mkdir(parents=True)
            (mem / "project_base.md").write_text(topic("base"))
            (mem / "MEMORY.md").write_text("- [base](project_base.md) — base\n")
            for p in mem.iterdir():
                self.at(p, self.clock.time() - 86_400)
        self.daemon.setup_schedule()

    @staticmethod
    def at(path: Path, when: float) -> None:
        os.utime(path, (when, when))

    def session(self, name: str) -> None:
        """A session of four records ending now (Claude Code's transcript, on the injected clock)."""
        sid = str(uuid.uuid4())
        now = self.clock.time()
        lines = []
        for k in range(4):
            ts = datetime.fromtimestamp(now - 3 + k, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
            role = "user" if k % 2 == 0 else "assistant"
            content: Any = f"step {k} of marker-{sid}" if role == "user" else [{"type": "text", "text": "did it"}]
            msg = {"role": role, "content": content}
            if role == "assistant":
                msg.update(id=f"msg_{uuid.uuid4().hex[:16]}", type="message", model="claude-sonnet-4-5")
            lines.append(json.dumps({"type": role, "uuid": str(uuid.uuid4()), "parentUuid": None,
                                     "sessionId": sid, "cwd": "/home/dev/" + name.rsplit("-", 1)[1],
                                     "timestamp": ts, "isSidechain": False, "userType": "external",
                                     "version": "2.1.328", "message": msg}))
        path = self.claude / "projects" / name / f"{sid}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        self.at(path, now)

    def step(self, minutes: int = 15) -> None:
        """Advance, let the loop tick, run what it queued (in order, on this thread), deliver the
        worker's messages: the daemon's loop and its worker thread, without threads."""
        self.clock.advance(minutes * 60)
        d = self.daemon
        d.tick()
        d.drain()
        while d.worker.run_queued(d.state):
            d.drain()
        d.drain()

    def events(self, name: str, **match: Any) -> list[dict[str, Any]]:
        return [kw for kw in self.rec.named(name) if all(kw.get(k) == v for k, v in match.items())]


@pytest.fixture
def week(tmp_path: Path, stub_api: StubAPI, monkeypatch: pytest.MonkeyPatch) -> Iterator[Week]:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.setenv("TZ", "UTC")
    stub_api.fallback = Reply(body=stub_api.message(stub_api.text("Nothing to add.")))

    def dream_looks_first(body: dict[str, Any]) -> Reply | None:
        # A dream that read nothing is no consolidation (issue 34: an empty end_turn leaves the last
        # consolidation where it was, so its sessions still count): the week's dreams look at the folder
        # first, as a model that consolidates does, then find nothing to change.
        dream = any(t.get("name") == "forget_memory" for t in body.get("tools") or [])
        looked = any(isinstance(b, dict) and b.get("type") == "tool_result"
                     for m in body.get("messages") or [] if isinstance(m.get("content"), list) for b in m["content"])
        return Reply(body=stub_api.message(stub_api.memory("view", path="/memories"))) if dream and not looked else None

    stub_api.responder = dream_looks_first
    w = Week(tmp_path, stub_api)
    try:
        yield w
    finally:
        w.daemon.close()


def test_a_simulated_week(week: Week) -> None:
    w = week
    s = w.stub
    st = w.daemon.state
    end = START + timedelta(days=7)
    night = 0
    checkins: list[float] = []
    before: list[list[Any]] = []  # the run rows each check-in reads (it prunes old skipped ones after)
    while w.clock.now() < end:
        now = w.clock.now()
        for name, hours in SESSION_HOURS.items():
            if now.minute == 0 and now.hour in hours:
                w.session(name)
        if (now.hour, now.minute) == (16, 0):  # Claude Code saves a memory of A's day: the night's dream has
            mem = w.claude / "projects" / A / "memory" / f"project_day_{now.date().isoformat()}.md"  # work
            mem.write_text(topic(f"day {now.date().isoformat()}"))
            w.at(mem, w.clock.time())
        if (now.hour, now.minute) == (2, 45):
            night += 1
            # A's dream of this night writes one memory (the model's tool call), then says it is done
            s.script(s.message(s.memory("create", path=f"/memories/project_night_{night}.md",
                                        file_text=topic(f"night {night}"))),
                     s.message(s.text(f"Consolidated night {night}.")))
        if (now.hour, now.minute) == (7, 30):
            checkins.append(w.clock.time())
            before.append([r for r in st.runs(limit=10_000) if r.job != "checkin"])
        w.step()
    assert night == 7 and s.pending == 0

    # the schedule: one dream a night, one check-in a morning, a catch-up every 2 hours, none twice
    due = Counter(e["job"] for e in w.events("schedule.due"))
    assert due == {"dream": 7, "checkin": 7, "catchup": 84}
    slots = [(e["job"], e["slot"]) for e in w.events("schedule.due")]
    assert len(slots) == len(set(slots))
    assert all(not e["caught_up"] for e in w.events("schedule.due"))
    assert [e["slot"][11:16] for e in w.events("schedule.due", job="dream")] == ["03:00"] * 7
    assert w.events("job.crashed") == [] and w.events("daemon.error") == []

    # dreams only past their gates: A every night, B every third night, C never
    dreams = st.runs(job="dream", limit=1000)
    per_night: dict[str, list[str]] = {}
    for r in sorted(dreams, key=lambda r: (r.started, r.id)):
        per_night.setdefault(datetime.fromtimestamp(r.started, UTC).date().isoformat(), []).append(r.project or "")
    days = [(START + timedelta(days=k)).date().isoformat() for k in range(1, 8)]
    assert per_night == {d: [A, B] if k in (1, 3, 5) else [A] for k, d in enumerate(days)}
    assert {r.outcome for r in dreams if r.project == A} == {"changed"}
    assert {r.outcome for r in dreams if r.project == B} == {"unchanged"}
    for k in range(1, 8):
        assert (w.claude / "projects" / A / "memory" / f"project_night_{k}.md").exists()
    gated = Counter((e["project"], e["gate"]) for e in w.events("job.skip", job="dream"))
    assert gated == {(B, "min_sessions"): 4, (C, "min_sessions"): 7}

    # catch-ups: every session extracted once (its records sent to the model once, never again)
    catchups = st.runs(job="catchup", limit=10_000)
    finished = w.events("job.finish", job="catchup")
    assert len(finished) == 84 * 3 and {e["outcome"] for e in finished} <= {"skipped", "unchanged", "changed"}
    # the run log keeps the catch-ups that ran and the skipped ones of the 48 hours before the last
    # check-in (memd.state.SKIPPED_KEEP_S); the check-ins pruned the rest
    pruned = sum(e["rows"] for e in w.events("state.pruned"))
    assert pruned > 0 and len(catchups) == len(finished) - pruned
    assert all(r.outcome != "skipped" or (r.ended or 0) >= checkins[-1] - 48 * 3600 for r in catchups)
    assert {r.outcome for r in catchups if r.outcome != "skipped"} == {e["outcome"] for e in finished} - {"skipped"}
    sent: Counter[str] = Counter()
    for req in s.requests:
        if req.batched:  # the stub's record of a batched request answered: it was sent by its batch's create
            continue
        body = json.dumps(req.body)
        for t in st.transcripts(A) + st.transcripts(B):
            if f"step 0 of marker-{t.session_id}" in body and "Consolidate" not in body:
                sent[t.session_id] += 1
    sessions = [t.session_id for t in st.transcripts(A) + st.transcripts(B)]
    assert len(sessions) == 7 * 3 and all(sent[sid] == 1 for sid in sessions), sent
    assert all(t.extract_offset == t.size for t in st.transcripts(A) + st.transcripts(B))

    # each morning's report: exactly the runs since the previous check-in, and the night's dreams
    reports = w.events("checkin.report")
    assert len(reports) == 7 and len(checkins) == 7
    for k, (rep, at, runs) in enumerate(zip(reports, checkins, before, strict=True)):
        since = checkins[k - 1] if k else at - 86_400
        window = [r for r in runs if since < r.started <= at]
        assert rep["runs"] == len(window)
        assert rep["outcomes"] == dict(Counter(r.outcome for r in window))
        text = Path(rep["path"]).read_text()
        night_dreams = [line for line in text.splitlines() if "| dream |" in line]
        assert sorted(line.split(" | ")[2] for line in night_dreams) == per_night[days[k]]
        assert "| " + A + " | changed | +1 " in "\n".join(night_dreams)
        assert rep["changes"] == sum(r.added + r.changed + r.deleted for r in window)
