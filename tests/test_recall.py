"""Recall through the real SDK against the local Messages API stub (tests/plugins/stub_api.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from memd import recall
from memd.config import BudgetConfig, Config, HooksConfig, ModelConfig, replace
from memd.memfolder.manifest import build
from tests.plugins.hooks import ROOT, SESSION, HookProject, run_hook, topic
from tests.plugins.stub_api import Reply, StubAPI

DAY = 86400.0


def cfg(stub: StubAPI, **hooks: Any) -> Config:
    return Config(model=replace(ModelConfig(), base_url=stub.base_url),
                  hooks=replace(HooksConfig(), recall=True, **hooks))


def pick(stub: StubAPI, *names: str) -> None:
    stub.enqueue(stub.message(stub.text(json.dumps({"files": list(names)}))))


def memfile(folder: Path, name: str, *, age_days: float = 0.0, description: str = "a memory",
            body: str = "body\n", mtype: str = "project") -> Path:
    p = folder / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(topic(description=description, mtype=mtype, body=body, name=name))
    t = time.time() - age_days * DAY
    os.utime(p, (t, t))
    return p


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")


@pytest.fixture
def memory(tmp_path: Path) -> Path:
    m = tmp_path / "memory"
    m.mkdir()
    (m / "MEMORY.md").write_text("- [x](x.md) — x\n")
    return m


# --------------------------------------------------------------------------- the manifest


def test_manifest_is_newest_first_bounded_and_reads_only_the_head(memory: Path) -> None:
    for i in range(205):
        memfile(memory, f"m{i:03d}.md", age_days=i, description=f"memory number {i}")
    # description past line 30: recall must not see it
    deep = memory / "deep.md"
    deep.write_text("---\nname: deep\n" + "".join(f"k{i}: v\n" for i in range(30)) + "description: hidden\n---\n")
    os.utime(deep, (time.time() + 10, time.time() + 10))
    (memory / "sub").mkdir()
    memfile(memory, "sub/nested.md", age_days=0.5, description="in a subfolder")
    (memory / ".hidden.md").write_text("x")
    entries = build(memory, max_files=200, max_lines=30).entries
    names = [e.name for e in entries]
    assert len(entries) == 200
    assert names[0] == "deep.md" and entries[0].description is None
    assert "sub/nested.md" in names and "MEMORY.md" not in names and ".hidden.md" not in names
    assert "m197.md" in names and "m198.md" not in names  # the oldest fall off
    mtimes = [e.mtime for e in entries]
    assert mtimes == sorted(mtimes, reverse=True)
    line = recall.render_manifest([e for e in entries if e.name == "m001.md"])
    assert line.startswith("- m001.md [project] ") and line.endswith(": memory number 1")


def test_manifest_reads_both_frontmatter_shapes_and_broken_yaml(memory: Path) -> None:
    (memory / "nested.md").write_text("---\nname: n\ndescription: nested one\nmetadata:\n  type: user\n---\nb\n")
    (memory / "broken.md").write_text("---\nname: b\ndescription: a: b: c\ntype: feedback\n---\nb\n")
    (memory / "none.md").write_text("no frontmatter\n")
    got = {e.name: (e.type, e.description) for e in build(memory).entries}
    assert got["nested.md"] == ("user", "nested one")
    assert got["broken.md"] == ("feedback", "a: b: c")
    assert got["none.md"] == (None, None)


@pytest.mark.parametrize(("days", "line"), [(0.0, None), (0.9, None), (1.0, "This memory is 1 day old."),
                                            (12.3, "This memory is 12 days old.")])
def test_age_lines(days: float, line: str | None) -> None:
    now = 1_800_000_000.0
    assert recall.age_line(now - days * DAY, now) == line


# --------------------------------------------------------------------------- selection and injection


def test_recall_asks_with_structured_output_and_injects_chosen_files(
        stub_api: StubAPI, keyed: None, memory: Path) -> None:
    memfile(memory, "feedback_tests.md", age_days=12, description="how the user wants tests", body="Use pytest.\n")
    memfile(memory, "user_role.md", age_days=0.1, description="who the user is", body="Data scientist.\n")
    memfile(memory, "project_other.md", age_days=3, description="unrelated")
    pick(stub_api, "feedback_tests.md", "ghost.md", "user_role.md", "../../etc/passwd")
    res = recall.recall("write tests for the parser", memory, cfg(stub_api))
    assert res.chosen == ["feedback_tests.md", "user_role.md"]
    assert res.dropped == ["ghost.md", "../../etc/passwd"]  # hallucinated names never reach a file read
    assert res.text is not None
    assert '<memory file="feedback_tests.md">\nThis memory is 12 days old.\n---' in res.text
    assert '<memory file="user_role.md">\n---' in res.text  # under a day: no age line
    assert "Use pytest." in res.text and "Data scientist." in res.text
    body = stub_api.requests[0].body
    assert body["model"] == "claude-haiku-5-5" and body["max_tokens"] == 256
    assert body["thinking"] == {"type": "disabled"}
    fmt = body["output_config"]["format"]
    assert fmt["type"] == "json_schema" and fmt["schema"]["required"] == ["files"]
    user = body["messages"][0]["content"]
    assert "write tests for the parser" in user
    assert user.index("user_role.md") < user.index("project_other.md") < user.index("feedback_tests.md")
    assert "at most 5" in body["system"]


def test_at_most_five_files_and_four_kb_each(stub_api: StubAPI, keyed: None, memory: Path) -> None:
    for i in range(7):
        memfile(memory, f"f{i}.md", body=("word " * 2000) if i == 0 else "small\n")
    pick(stub_api, *(f"f{i}.md" for i in range(7)))
    res = recall.recall("q", memory, cfg(stub_api))
    assert len(res.chosen) + len(res.left) == 5
    assert res.text is not None and len(res.text) <= recall.MAX_CONTEXT_CHARS
    block = res.text.split('<memory file="f0.md">')[1].split("</memory>")[0]
    assert len(block.encode()) <= 4096 + 200 and "[… cut" in block


def test_session_dedupe_and_the_60kb_cap(stub_api: StubAPI, keyed: None, memory: Path, tmp_path: Path) -> None:
    for i in range(24):
        memfile(memory, f"big{i:02d}.md", age_days=i, body="x" * 5000)
    conf = cfg(stub_api)
    assert conf.hooks.recall_session_bytes == 61_440
    state = tmp_path / "state"
    seen: list[str] = []
    total = 0
    for call in range(12):
        # the model names two files it already got and every file in turn
        pick(stub_api, *seen[:2], *(f"big{i:02d}.md" for i in range(24) if f"big{i:02d}.md" not in seen))
        res = recall.recall("q", memory, conf, state_dir=state, session_id=SESSION)
        assert not set(res.chosen) & set(seen), f"call {call} surfaced a file twice"
        if call > 0 and stub_api.requests:
            manifest = stub_api.requests[-1].body["messages"][0]["content"] if res.chosen or res.left else ""
            assert all(f"- {n} " not in manifest for n in seen)  # surfaced files leave the manifest
        seen += res.chosen
        total += sum(len(b.encode()) for b in (res.text or "").split("\n\n")[1:])
    assert len(seen) == len(set(seen))
    assert 61_440 - 4_300 < total <= 61_440
    saved = json.loads((state / "recall" / f"{SESSION}.json").read_text())
    assert saved["surfaced"] == seen and saved["bytes"] <= 61_440
    # what is left of the budget fits no file: nothing more is injected
    pick(stub_api, *(f"big{i:02d}.md" for i in range(24)))
    assert recall.recall("q", memory, conf, state_dir=state, session_id=SESSION).text is None
    # and once (almost) nothing is left, the model is not even asked
    path = state / "recall" / f"{SESSION}.json"
    path.write_text(json.dumps({"surfaced": seen, "bytes": 61_440 - recall.MIN_USEFUL_BYTES + 1}))
    before = len(stub_api.requests)
    assert recall.recall("q", memory, conf, state_dir=state, session_id=SESSION).text is None
    assert len(stub_api.requests) == before
    # another session starts afresh
    pick(stub_api, "big00.md")
    assert recall.recall("q", memory, conf, state_dir=state, session_id="other").chosen == ["big00.md"]


@pytest.mark.parametrize("reply", [
    Reply(500, {"type": "error", "error": {"type": "api_error", "message": "boom"}}),
    StubAPI.error(429, retry_after=600),
    StubAPI.error(529),
    Reply(200, raw=b"{not json"),
    Reply(200, {"type": "message", "role": "assistant", "content": [{"type": "text", "text": "no json here"}],
                "id": "m", "model": "x", "stop_reason": "end_turn", "stop_sequence": None}),
], ids=["500", "429-retry-after-600", "529", "garbage", "prose"])
def test_a_failing_api_injects_nothing(stub_api: StubAPI, keyed: None, memory: Path, reply: Reply) -> None:
    memfile(memory, "a.md")
    stub_api.fallback = reply
    res = recall.recall("q", memory, cfg(stub_api, recall_timeout_s=3.0))
    assert res.text is None and res.chosen == []


def test_a_slow_api_is_abandoned_at_the_deadline(stub_api: StubAPI, keyed: None, memory: Path) -> None:
    memfile(memory, "a.md")
    stub_api.fallback = Reply(200, StubAPI().message(StubAPI.text('{"files": ["a.md"]}')), delay=30)
    abandoned: list[bool] = []
    res = recall.recall("q", memory, cfg(stub_api, recall_timeout_s=1.0), on_abandon=lambda: abandoned.append(True))
    assert res.text is None and res.failed


def test_no_key_means_no_call(stub_api: StubAPI, memory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    memfile(memory, "a.md")
    res = recall.recall("q", memory, cfg(stub_api))
    assert res.text is None and res.failed and "API key" in res.note
    assert stub_api.requests == []


# --------------------------------------------------------------------------- the real hook process


def _recall_config(hp: HookProject, stub: StubAPI, timeout: float = 8.0) -> None:
    hp.set_config(f'[model]\nbase_url = "{stub.base_url}"\n\n[hooks]\nrecall = true\n'
                  f"recall_timeout_s = {timeout}\n")


def test_hook_recall_end_to_end(hook_project: HookProject, stub_api: StubAPI, keyed: None) -> None:
    memfile(hook_project.memory, "feedback_style.md", age_days=40, description="code style", body="Tabs.\n")
    memfile(hook_project.memory, "user_x.md", description="who")
    _recall_config(hook_project, stub_api)
    pick(stub_api, "feedback_style.md", "made_up.md")
    ev = hook_project.event("UserPromptSubmit", prompt="reformat this file")
    run = run_hook(ev)
    hso = run.answer["hookSpecificOutput"]
    assert hso["hookEventName"] == "UserPromptSubmit"
    assert "This memory is 40 days old." in hso["additionalContext"] and "Tabs." in hso["additionalContext"]
    # per-session state lives in memd's state folder, never in the memory folder
    assert (hook_project.state / "recall" / f"{SESSION}.json").exists()
    assert sorted(p.name for p in hook_project.memory.iterdir()) == ["feedback_style.md", "user_x.md"]
    # the same prompt again: the file is not surfaced twice
    pick(stub_api, "feedback_style.md")
    assert run_hook(ev).out == ""
    assert "feedback_style.md" not in stub_api.requests[-1].body["messages"][0]["content"]


def test_hook_recall_is_off_by_default(hook_project: HookProject, stub_api: StubAPI, keyed: None) -> None:
    memfile(hook_project.memory, "a.md")
    run = run_hook(hook_project.event("UserPromptSubmit", prompt="hello"))
    assert (run.rc, run.out) == (0, "") and stub_api.requests == []


@pytest.mark.parametrize("mode", ["slow", "failing", "no key"])
def test_hook_recall_fails_open(hook_project: HookProject, stub_api: StubAPI, mode: str,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    memfile(hook_project.memory, "a.md")
    _recall_config(hook_project, stub_api, timeout=1.5)
    if mode == "no key":
        monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    else:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    if mode == "slow":
        stub_api.fallback = Reply(200, StubAPI().message(StubAPI.text('{"files": ["a.md"]}')), delay=60)
    elif mode == "failing":
        stub_api.fallback = StubAPI.error(500)
    run = run_hook(hook_project.event("UserPromptSubmit", prompt="hello"), timeout=30)
    assert (run.rc, run.out) == (0, "")
    if mode == "no key":
        assert stub_api.requests == []
    logged = [x for x in hook_project.log_lines() if x["event"] == "hook.recall"]
    assert logged and logged[-1]["chosen"] == []


# --------------------------------------------------------------------------- memd recall


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = dict(os.environ if env is None else env)
    e["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "memd", *args], capture_output=True, text=True, env=e,
                          timeout=60, check=False)


def test_cli_recall_prints_what_would_be_injected(hook_project: HookProject, stub_api: StubAPI,
                                                  keyed: None) -> None:
    memfile(hook_project.memory, "reference_dash.md", age_days=2, description="the dashboard", body="grafana\n")
    hook_project.set_config(f'[model]\nbase_url = "{stub_api.base_url}"\n')  # recall need not be on for the CLI
    pick(stub_api, "reference_dash.md", "nope.md")
    proc = _cli("recall", "where is the dashboard", "--project", str(hook_project.memory))
    assert proc.returncode == 0, proc.stderr
    assert "This memory is 2 days old." in proc.stdout and "grafana" in proc.stdout
    assert "chosen: reference_dash.md" in proc.stderr and "nope.md" in proc.stderr
    proc = _cli("recall", "x", "--project", str(hook_project.memory), "--manifest")
    assert proc.stdout.startswith("- reference_dash.md [project] ")


def test_cli_recall_without_a_key_says_so(hook_project: HookProject, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    memfile(hook_project.memory, "a.md")
    proc = _cli("recall", "q", "--project", str(hook_project.memory))
    assert proc.returncode == 1 and "API key" in proc.stderr and "Traceback" not in proc.stderr


def test_budget_config_bounds_the_manifest(memory: Path) -> None:
    for i in range(10):
        memfile(memory, f"m{i}.md", age_days=i)
    c = Config(budget=replace(BudgetConfig(), max_topic_files=3))
    assert [e.name for e in build(memory, max_files=c.budget.max_topic_files).entries] == [
        "m0.md", "m1.md", "m2.md"]


# --------------------------------------------------------------------------- a slow import


_SLOW_IMPORT = """
import importlib.abc, json, sys, time
from pathlib import Path


class Slow(importlib.abc.MetaPathFinder):  # importing the SDK takes 3 s, as under a heavy load
    def find_spec(self, name, path, target=None):
        if name == "anthropic":
            time.sleep(3.0)
        return None


sys.meta_path.insert(0, Slow())
from memd import recall
from memd.config import Config, HooksConfig, ModelConfig, replace

cfg = Config(model=replace(ModelConfig(), base_url=sys.argv[2]),
             hooks=replace(HooksConfig(), recall=True, recall_timeout_s=2.0))
t0 = time.monotonic()
res = recall.recall("q", Path(sys.argv[1]), cfg)
print(json.dumps({"chosen": res.chosen, "note": res.note, "seconds": time.monotonic() - t0,
                  "loaded": "anthropic" in sys.modules}))
"""


def test_a_slow_sdk_import_does_not_eat_the_calls_deadline(stub_api: StubAPI, keyed: None, memory: Path) -> None:
    """The SDK import (17 s seen under load) is bounded apart: the 2 s deadline is the model call's."""
    memfile(memory, "a.md")
    pick(stub_api, "a.md")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", _SLOW_IMPORT, str(memory), stub_api.base_url], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["loaded"] and out["seconds"] >= 3.0
    assert out["chosen"] == ["a.md"], out["note"]


def test_loading_the_client_has_its_own_bound(monkeypatch: pytest.MonkeyPatch, stub_api: StubAPI, keyed: None,
                                              memory: Path) -> None:
    memfile(memory, "a.md")
    monkeypatch.setattr(recall, "LOAD_BOUND_S", 0.2)
    monkeypatch.setattr(recall, "load_client", lambda cfg: time.sleep(2.0))
    abandoned: list[bool] = []
    res = recall.recall("q", memory, cfg(stub_api, recall_timeout_s=5.0), on_abandon=lambda: abandoned.append(True))
    assert res.failed and res.text is None and abandoned
    assert "loading the model client took more than 0.2 s" in res.note
    assert stub_api.requests == []
