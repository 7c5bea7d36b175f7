"""Model-based test of "what changed since the last dream" (``memd.jobs.dream.since_last_dream``):
random sequences of Claude Code's writes, identical rewrites (sync, an editor's save), deletions,
undos (a file put back as the last dream left it), dreams that commit their result to memd's history
and consolidations that commit nothing (a dream that changed nothing, Claude Code's own dream), checked
after every step against a plain model: the last dream's files, the last consolidation's time and the
files' times."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from memd import history
from memd.config import Config
from memd.jobs import JobContext
from memd.jobs.dream import BASE_SLACK_S, since_last_dream
from memd.layout import Project

NAMES = ("user_role.md", "feedback_tabs.md", "project_deploy.md", "reference_dash.md")
BODIES = ("one", "two", "three")


def _topic(name: str, body: str) -> bytes:
    return f"---\nname: {name}\ndescription: {body}\ntype: user\n---\n{body}\n".encode()


class SinceLastDream(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="memd-since-"))
        self.mem = self.tmp / "p" / "memory"
        self.mem.mkdir(parents=True)
        (self.mem / "team").mkdir()
        (self.mem / "team" / "t.md").write_bytes(_topic("t", "team"))  # never a change of the dream's
        self.project = Project("p", self.tmp / "p", self.mem)
        self.jc = JobContext(config=Config(), claude_dir=self.tmp / "claude", state_dir=self.tmp / "state",
                             state=None)
        self.clock = time.time()  # the files' times, always moving forward
        self.base: dict[str, bytes] | None = None  # the model: the files the last dream left
        self.base_time = 0.0
        self.last: float | None = None  # the last consolidation
        self.mtimes: dict[str, float] = {}
        self.dreams = 0

    def teardown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _put(self, name: str, data: bytes) -> None:
        self.clock = max(self.clock, time.time(), self.last or 0.0) + 5
        p = self.mem / name
        p.write_bytes(data)
        os.utime(p, (self.clock, self.clock))
        self.mtimes[name] = self.clock

    def _live(self) -> dict[str, bytes]:
        return {n: (self.mem / n).read_bytes() for n in NAMES if (self.mem / n).exists()}

    @rule(name=st.sampled_from(NAMES), body=st.sampled_from(BODIES))
    def claude_code_writes(self, name: str, body: str) -> None:
        self._put(name, _topic(name, body))

    @rule(name=st.sampled_from(NAMES))
    def same_bytes_again(self, name: str) -> None:
        if (self.mem / name).exists():
            self._put(name, (self.mem / name).read_bytes())

    @rule(name=st.sampled_from(NAMES))
    def delete(self, name: str) -> None:
        (self.mem / name).unlink(missing_ok=True)
        self.mtimes.pop(name, None)

    @rule(name=st.sampled_from(NAMES))
    def undo_puts_back(self, name: str) -> None:
        if self.base is not None and name in self.base:
            self._put(name, self.base[name])

    @rule()
    def dream_commits(self) -> None:
        self.dreams += 1
        files = self._live()
        history.commit_files(self.jc.state_dir, self.project.name, files, f"dream {self.dreams}", kind="after",
                             run=f"dream-{self.dreams}", job="dream")
        self.base = files
        self.base_time = float(history.list_runs(self.jc.state_dir, self.project.name, limit=1)[0].time)
        self.last = max(time.time(), self.clock) + 1

    @rule(later=st.sampled_from((1.0, BASE_SLACK_S + 100)))
    def consolidation_without_commit(self, later: float) -> None:
        self.last = max(time.time(), self.clock) + later
        self.clock = self.last

    @invariant()
    def agrees_with_the_model(self) -> None:
        d = since_last_dream(self.jc, self.project, self.last)
        if self.base is None and self.last is None:
            assert d.first and not d.changed and not d.deleted
            return
        live = self._live()
        by_time = self.last is not None and (self.base is None or self.last - self.base_time > BASE_SLACK_S)
        want = {n for n, data in live.items()
                if (by_time and self.last is not None and self.mtimes.get(n, 0.0) > self.last)
                or (self.base is not None and self.base.get(n) != data)}
        assert not d.first
        assert set(d.changed) == want, (d, want)
        assert d.deleted == sorted(set(self.base or {}) - set(live))
        assert "team/t.md" not in d.changed


def test_since_last_dream_agrees_with_the_model() -> None:
    run_state_machine_as_test(SinceLastDream, settings=settings(max_examples=25, stateful_step_count=12,
                                                                deadline=None, database=None))
