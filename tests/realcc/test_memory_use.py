"""Memory use counted from transcripts the real CLI wrote (issue 31): an index load, a read, a write and,
with recall on, a recall, each counted once by memd's scan, however often it reads the transcripts.

Two sessions of the pinned CLI in one sandbox: the first (recall off) loads MEMORY.md, Reads a topic
file and Writes a new one; the second turns Claude Code's recall on (the server-side flag
``tengu_moth_copse``, read from the cached flags as ``tests/realcc/test_recall_manifest.py`` does), whose
selector (the stand-in) picks the topic file: the CLI attaches it as ``relevant_memories`` once the turn
goes on past a tool call. With recall on, 2.1.332 loads no index (no ``instructions`` of type AutoMem).
"""

from __future__ import annotations

import json
import time

from memd import layout
from memd.config import Config
from memd.state import StateStore
from memd.transcripts.scan import scan_project
from tests.realcc.cli import Sandbox, cc_name

RECALL_ENV = {"CLAUDE_CODE_GB_DISK_CACHE_WHEN_TELEMETRY_OFF": "1"}


def test_a_load_a_read_a_write_and_a_recall_are_each_counted_once(sandbox: Sandbox) -> None:
    md = sandbox.memory
    (md / "MEMORY.md").write_text("- [Deploy](project_deploy.md) — deploys on Fridays\n", encoding="utf-8")
    (md / "project_deploy.md").write_text("---\nname: Deploy\ndescription: deploys on Fridays\ntype: project\n"
                                          "---\nDeploys happen on Fridays.\n", encoding="utf-8")
    stub = sandbox.stub
    stub.turns(
        stub.message(stub.tool_use("Read", {"file_path": str(md / "project_deploy.md")})),
        stub.message(stub.tool_use("Write", {"file_path": str(md / "user_role.md"), "content": (
            "---\nname: Role\ndescription: backend engineer\ntype: user\n---\nThe user is a backend engineer.\n")})),
    )
    run = sandbox.run("when do we deploy?")
    assert run.rc == 0, run.stderr[-2000:]
    (sandbox.home / ".claude.json").write_text(json.dumps({"cachedGrowthBookFeatures": {"tengu_moth_copse": True}}))
    stub.side_reply = lambda rec: '{"selected_memories": ["project_deploy.md"]}'
    stub.turns(stub.message(stub.tool_use("Bash", {"command": "sleep 2", "description": "wait"})))
    run = sandbox.run("and at what time do we deploy?", env=RECALL_ENV)
    assert run.rc == 0, run.stderr[-2000:]
    kinds = [json.loads(ln).get("attachment", {}).get("type") for t in sandbox.transcripts()
             for ln in t.read_text().splitlines() if '"attachment"' in ln]
    assert "relevant_memories" in kinds and "instructions" in kinds, kinds

    name = cc_name(sandbox.repo)
    project = layout.project_for_folder(sandbox.claude, sandbox.projects / name)
    with StateStore.open(sandbox.base / "state") as state:
        for _ in range(2):  # a second pass (and a rescan from scratch below) counts nothing again
            scan_project(project, state, Config(), now=time.time())
        for t in state.transcripts(name):
            state.reset_transcript(t.path)
        scan_project(project, state, Config(), now=time.time())
        uses = {rel: {k: u[k] for k in ("reads", "recalls", "writes")} for rel, u in state.memory_uses(name).items()}
        assert len(state.index_loads(name)) == 1
    assert uses == {"project_deploy.md": {"reads": 1, "recalls": 1, "writes": 0},
                    "user_role.md": {"reads": 0, "recalls": 0, "writes": 1}}, uses
