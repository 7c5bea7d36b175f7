"""`memd forget` across machines as a hypothesis state machine (issue 22): two machines and a bare remote;
they write files with and without a phrase, sync, and forget it, in any order hypothesis finds.

Invariants, after every step:
- once a forget of the phrase has been pushed, no object a ref of the remote reaches holds it, whatever
  either machine writes or syncs afterwards (a machine that wrote it again keeps it and sends nothing);
- on a machine that applied the record (wrote it, or honoured it at a sync), a live file that holds the
  phrase is one `memd status` names (held, never sent), once a sync has judged it.
"""

from __future__ import annotations

import itertools
import subprocess
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from memd.sync import forget as sync_forget
from tests.plugins.sync import Machine, bare_remote, topic
from tests.test_forget_sync import PHRASE, forget_on, remote_holds

FILES = ("a.md", "b.md", "c.md")


def fleet(root: Path) -> type[RuleBasedStateMachine]:
    counter = itertools.count()

    class Fleet(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            base = root / f"run{next(counter)}"
            self.remote = bare_remote(base / "remote.git")
            url = "file://" + str(self.remote)
            self.m = {name: Machine(base, name, url) for name in ("ma", "mb")}
            self.forgotten = False  # a forget was pushed
            self.words = itertools.count()

        @rule(who=st.sampled_from(("ma", "mb")), rel=st.sampled_from(FILES), phrase=st.booleans())
        def write(self, who: str, rel: str, phrase: bool) -> None:
            body = f"Note {next(self.words)} from {who}.\n" + (f"The vault phrase is {PHRASE}.\n" if phrase else "")
            self.m[who].write(rel, topic(rel[:-3], body))

        @rule(who=st.sampled_from(("ma", "mb")))
        def sync(self, who: str) -> None:
            out = self.m[who].outcome("app")
            # the guards may hold a push (a file cut short: the outgoing guard's shrink share), never the
            # rewrite: a branch rewritten by `memd forget` is honoured, not refused as force-pushed
            assert out.outcome != "failed" and "rewritten (force-pushed)" not in out.message, out

        @rule(who=st.sampled_from(("ma", "mb")))
        def forget(self, who: str) -> None:
            m = self.m[who]
            local, rem = forget_on(m, sync_forget.What("literal", PHRASE), apply=True)
            assert local.left == 0 and rem.left == 0, (local, rem)
            assert rem.status in ("changed", "nothing"), rem
            if rem.status == "changed":
                self.forgotten = True
            assert all(PHRASE not in (m.read(rel) or "") for rel in FILES)

        @invariant()
        def the_remote_never_holds_it_again(self) -> None:
            if self.forgotten:
                assert remote_holds(self.remote, PHRASE) == 0

        @invariant()
        def a_machine_that_forgot_it_names_every_file_holding_it(self) -> None:
            for m in self.m.values():
                if not sync_forget.applied(m.state_dir, m.project().name):
                    continue
                named = sync_forget.status_lines(m.state_dir)
                for rel in FILES:
                    if PHRASE in (m.read(rel) or ""):
                        # named once a sync judged it (a file written since the last sync is judged at the next)
                        assert rel in named or not self._synced_since_written(m, rel), (rel, named)

        def _synced_since_written(self, m: Machine, rel: str) -> bool:
            from memd.sync import gitremote

            seen = gitremote.seen(m.state_dir).get(m.project().name) or {}
            return seen.get("folder") == gitremote.folder_mark(m.mem())

    return Fleet


def test_forget_holds_across_any_order_of_writes_syncs_and_forgets(tmp_path: Path, file_remote: str) -> None:
    assert subprocess.run(["git", "--version"], capture_output=True, check=False).returncode == 0
    machine: Any = fleet(tmp_path)
    run_state_machine_as_test(machine, settings=settings(max_examples=6, stateful_step_count=14, deadline=None,
                                                         suppress_health_check=list(HealthCheck)))
