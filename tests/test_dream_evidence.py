"""The eight delta scenarios of issue 31, through the real SDK against the loopback stub: each is fixed by a
stand-in model (``Standin``) that acts only on what memd sends it, so each passes only when memd hands the
dream the evidence (and calls it at all). Before issue 31 every one failed: the dream was not called (a
passed date, a session, nothing changed), or it was handed only the changed files and a 200-row manifest
without use figures, where the stand-in finds nothing to act on.

The stand-in's rules, from the request alone:
- a pair under "Possible duplicates", with both files' text: when every sentence of one is in the other,
  those sentences leave the larger, vaguer file; otherwise the older side (by the manifest's date; a file
  missing from the manifest is older) goes: merged into the newer when the newer holds each of its
  sentences (``forget_memory`` with ``into``), else deleted with its reason (the newer contradicts it);
- a memory under "a date that has passed": deleted;
- "The index is past its cut: N entries ...": the first N + 2 files listed (least used first) deleted;
- "Sessions since the last dream" and nothing else to do: a transcript search for each memory's first long
  description word; a hit saying the thing is gone or replaced deletes that memory.
Each deletion gives its reason (wt-forget's declared forgetting): the entry goes with the file.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any

from memd.jobs.dream import dream_project
from memd.layout import Project
from memd.transcripts.scan import scan_project
from tests import test_model_jobs
from tests.test_model_jobs import OLD, Env, topic

env = test_model_jobs.env  # the model-job tests' fixture, shared
SID = "3b0c6a43-1d3e-4f5a-9a8b-0c1d2e3f4a5b"


def _system(body: dict[str, Any]) -> str:
    return "".join(b["text"] for b in body["system"])


def _body(text: str) -> str:
    return text.split("\n---\n", 1)[1] if text.startswith("---\n") and "\n---\n" in text else text


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=\.)\s+", _body(text).strip()) if s.strip()]


class Standin:
    """A model that reads the request and acts on the evidence it finds there (see the module doc)."""

    def __init__(self, stub: Any) -> None:
        self.stub = stub
        self.requests: list[dict[str, Any]] = []
        self.searched: dict[str, str] = {}  # tool_use id -> the memory whose word was searched

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(body)
        s = self.stub
        last = body["messages"][-1]["content"]
        results = [b for b in last if isinstance(b, dict) and b.get("type") == "tool_result"] \
            if isinstance(last, list) else []
        if results:
            calls = []
            for r in results:
                rel = self.searched.pop(r["tool_use_id"], None)
                text = r["content"] if isinstance(r["content"], str) else json.dumps(r["content"])
                if rel is not None and re.search(r"\b(gone|no longer|replaced|moved)\b", text, re.I):
                    calls.append(s.memory("delete", path=f"/memories/{rel}", reason="a session says it is gone"))
            return s.message(*calls) if calls else s.message(s.text("done"))
        return s.message(*(self.first_turn(_system(body)) or [s.text("nothing to do")]))

    def first_turn(self, text: str) -> list[dict[str, Any]]:
        s = self.stub
        dates = dict(re.findall(r"^- /memories/(\S+) \[\w+\] (\d{4}-\d\d-\d\d)", text, re.M))
        files = dict(re.findall(r'<file path="/memories/([^"]+)">\n(.*?)\n</file>', text, re.S))
        calls: list[dict[str, Any]] = []
        gone: set[str] = set()
        for a, b in re.findall(r"^- /memories/(\S+) and /memories/(\S+): [\d.]+", text, re.M):
            if a not in files or b not in files or {a, b} & gone:
                continue
            sa, sb = _sentences(files[a]), _sentences(files[b])
            small, large = (a, b) if len(sa) <= len(sb) else (b, a)
            ss, sl = (sa, sb) if small == a else (sb, sa)
            if len(sl) > len(ss) and all(x in sl for x in ss):
                calls.extend(s.memory("str_replace", path=f"/memories/{large}", old_str=x + " ", new_str="")
                             for x in ss)
                continue
            older = min((a, b), key=lambda r: (dates.get(r, "0000"), r))
            newer = b if older == a else a
            so = _sentences(files[older])
            if all(x in _sentences(files[newer]) for x in so):  # a duplicate: merged into the newer file
                calls.append(s.tool_use("forget_memory", {"path": f"/memories/{older}", "into": f"/memories/{newer}",
                                                          "reason": "the newer memory says the same"}))
            else:
                calls.append(s.memory("delete", path=f"/memories/{older}",
                                      reason=f"contradicted by the newer /memories/{newer}"))
            gone.add(older)
        for rel in re.findall(r'^- /memories/(\S+): ".*" \(\d{4}-\d\d-\d\d has passed\)', text, re.M):
            if rel not in gone:
                calls.append(s.memory("delete", path=f"/memories/{rel}", reason="its date has passed"))
                gone.add(rel)
        m = re.search(r"^### The index is past its cut: (\d+) entries.*?\n((?:- .*\n?)+)", text, re.M)
        if m:
            listed = re.findall(r"^- /memories/(\S+):", m.group(2), re.M)
            for rel in [r for r in listed if r not in gone][:int(m.group(1)) + 2]:
                calls.append(s.memory("delete", path=f"/memories/{rel}", reason="unused; the index must lose lines"))
                gone.add(rel)
        if not calls and re.search(r"^## Sessions since the last dream \([1-9]", text, re.M):
            for rel, desc in re.findall(r"^- /memories/(\S+) \[\w+\] \S+ \d+B: ([^(\n]*)", text, re.M):
                word = next((w for w in re.findall(r"[A-Za-z]{6,}", desc)), None)
                if word:
                    call = s.tool_use("search_transcripts", {"pattern": word.lower()})
                    self.searched[call["id"]] = rel
                    calls.append(call)
        return calls


def _folder(env: Env, files: dict[str, str], *, prose: str = "# Memory\n\n") -> Project:
    p = env.project("-home-dev-app")
    lines = []
    for rel, text in files.items():
        m = re.search(r"^name: (.*)\ndescription: (.*)$", text, re.M)
        if m and "/" not in rel:
            lines.append(f"- [{m.group(1)}]({rel}) — {m.group(2)}\n")
    env.memory(p, {"MEMORY.md": prose + "".join(lines), **files})
    return p


def _dreamt_before(env: Env, p: Project) -> None:
    """A consolidation an hour ago: every file (written three days ago) is unchanged since it."""
    env.state.mark_consolidated(p.name, time.time() - 3600)


def _new(p: Project, rel: str, text: str, *, index: bool = True) -> None:
    (p.memory_dir / rel).write_text(text)
    m = re.search(r"^name: (.*)\ndescription: (.*)$", text, re.M)
    if index and m:
        idx = p.memory_dir / "MEMORY.md"
        idx.write_text(idx.read_text() + f"- [{m.group(1)}]({rel}) — {m.group(2)}\n")


def _run(env: Env, p: Project) -> tuple[Any, Standin]:
    model = Standin(env.stub)
    env.stub.responder = model
    out = dream_project(env.jc(), p)
    return out, model


BASE = {
    "user_role.md": topic("Role", "the user is a backend engineer who owns billing",
                          "The user is a backend engineer who owns the billing service.", "user"),
    "feedback_tests.md": topic("Tests first", "run the unit tests before every commit",
                               "Run pytest -q before every commit. **Why:** CI takes 40 minutes.", "feedback"),
    "reference_grafana.md": topic("Dashboards", "latency dashboards live in Grafana",
                                  "Latency dashboards: grafana.internal/d/api (owner: SRE).", "reference"),
}
DEPLOY = topic("Deploy", "how releases are deployed",
               "Deploys go out on Fridays after the 14:00 code freeze. Run make release from main; the on-call "
               "engineer approves the production rollout in Spinnaker.", "project")


def _files(p: Project) -> set[str]:
    return {f.name for f in p.memory_dir.glob("*.md")}


# --------------------------------------------------------------------------- the eight scenarios


def test_a_duplicate_of_an_unchanged_file(env: Env) -> None:
    p = _folder(env, {**BASE, "project_deploy.md": DEPLOY})
    _dreamt_before(env, p)
    _new(p, "project_release_process.md", topic(
        "Release process", "release steps and approvals",
        "Deploys go out on Fridays after the 14:00 code freeze. Run make release from main; the on-call engineer "
        "approves the production rollout in Spinnaker. Hotfixes skip the freeze.", "project"))
    out, _ = _run(env, p)
    assert out.outcome == "changed", out
    text = (p.memory_dir / "project_release_process.md").read_text()
    assert "Deploys go out on Fridays" not in text and "Hotfixes skip the freeze." in text  # said once now
    assert "Deploys go out on Fridays" in (p.memory_dir / "project_deploy.md").read_text()


def test_a_duplicate_behind_a_vague_description(env: Env) -> None:
    notes = topic("January notes", "Notes from the January testing session",
                  "We tested the checkout flow with the new payment provider. Deploys go out on Fridays after the "
                  "14:00 code freeze. The staging database was reset twice.", "project")
    p = _folder(env, {**BASE, "project_notes_jan.md": notes})
    _dreamt_before(env, p)
    _new(p, "project_deploy.md", topic("Deploy", "when deploys go out",
                                       "Deploys go out on Fridays after the 14:00 code freeze.", "project"))
    out, model = _run(env, p)
    assert out.outcome == "changed", out
    assert "Notes from the January testing session" in _system(model.requests[0])
    notes_now = (p.memory_dir / "project_notes_jan.md").read_text()
    assert "Deploys go out" not in notes_now and "staging database was reset" in notes_now


def test_a_contradiction_the_newer_file_wins(env: Env) -> None:
    p = _folder(env, {**BASE, "project_deploy.md": DEPLOY})
    _dreamt_before(env, p)
    _new(p, "project_deploy_day.md", topic(
        "Deploy day", "how releases are deployed now",
        "Deploys go out on Tuesdays after the 14:00 code freeze. Run make release from main; the on-call engineer "
        "approves the production rollout in Spinnaker.", "project"))
    out, _ = _run(env, p)
    assert out.outcome == "changed", out
    assert "project_deploy.md" not in _files(p) and "project_deploy_day.md" in _files(p)
    assert "project_deploy.md" not in (p.memory_dir / "MEMORY.md").read_text()


def test_a_file_made_stale_by_a_new_file(env: Env) -> None:
    ci = topic("CI", "continuous integration runs on Jenkins",
               "Continuous integration runs on Jenkins at ci.internal; builds of main take 40 minutes.", "project")
    p = _folder(env, {**BASE, "project_ci.md": ci})
    _dreamt_before(env, p)
    _new(p, "project_ci_actions.md", topic(
        "CI moved", "continuous integration moved from Jenkins to GitHub Actions",
        "Continuous integration moved from Jenkins to GitHub Actions on 2026-11-02; builds of main take 12 "
        "minutes.", "project"))
    out, _ = _run(env, p)
    assert out.outcome == "changed", out
    assert _files(p) >= {"project_ci_actions.md"} and "project_ci.md" not in _files(p)


def test_an_index_over_budget_from_old_files_loses_its_least_used_entries(env: Env) -> None:
    files = dict(BASE)
    for i in range(215):
        files[f"project_area_{i:03d}.md"] = topic(f"Area {i:03d}", f"facts about subsystem {i:03d}",
                                                  f"Subsystem {i:03d} is owned by team {i % 17}.", "project")
    p = _folder(env, files)
    _dreamt_before(env, p)
    # sessions loaded the index 30 times and read every file but 25 scattered ones (none of them last)
    env.state.record_uses(p.name, "s", [("load", "", "", time.time() - 7200)])
    for n in range(29):
        env.state.record_uses(p.name, f"s{n}", [("load", "", "", time.time() - 7200 + n)])
    unused = {f"project_area_{i:03d}.md" for i in range(3, 200, 8)}
    for rel in files:
        if rel not in unused:
            env.state.record_uses(p.name, "s1", [("read", f"t-{rel}", rel, time.time() - 5000)])
    out, _ = _run(env, p)
    assert out.outcome == "changed", out
    left = _files(p)
    deleted = set(files) - left
    assert len(deleted) >= 20 and deleted <= unused, sorted(deleted - unused)[:5]  # the least used went
    assert all(f"project_area_{i:03d}.md" in left for i in range(205, 215))  # not the last ones
    from memd.core import index as mindex

    assert mindex.measure((p.memory_dir / "MEMORY.md").read_text()).level != "over"


def _session_line(kind: str, text: str, ts: str) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": kind, "content": text if kind == "user" else [{"type": "text", "text": text}]}
    if kind == "assistant":
        msg.update(id=f"msg_{ts[-6:-1]}", type="message", model="claude-sonnet-5-5")
    return {"type": kind, "uuid": f"u-{ts}", "sessionId": SID, "timestamp": ts, "cwd": "/home/dev/app",
            "isSidechain": False, "message": msg}


def test_a_memory_made_stale_only_by_a_session(env: Env) -> None:
    host = topic("Staging host", "staging environment lives on staging-old.internal",
                 "The staging environment lives on staging-old.internal (reset nightly).", "project")
    p = _folder(env, {**BASE, "project_staging.md": host})
    _dreamt_before(env, p)
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(time.time() - 1800))
    path = p.dir / f"{SID}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [
        _session_line("user", "fyi staging-old.internal is gone, the staging environment is now staging2.internal",
                      now),
        _session_line("assistant", "Noted.", now)]))
    os.utime(path, (time.time() - 1800, time.time() - 1800))
    scan_project(p, env.state, env.config, now=time.time())
    out, model = _run(env, p)
    assert model.requests, "the dream was not called: no memory file changed"
    assert out.outcome == "changed", out
    assert "project_staging.md" not in _files(p)


def test_a_passed_until_date_with_nothing_changed_is_dreamt_once(env: Env) -> None:
    freeze = topic("Merge freeze", "merge freeze for the mobile release until 2026-01-15",
                   "No merges to main until 2026-01-15 (mobile release).", "project")
    p = _folder(env, {**BASE, "project_merge_freeze.md": freeze})
    _dreamt_before(env, p)
    out, model = _run(env, p)
    assert model.requests and out.outcome == "changed", out
    assert "project_merge_freeze.md" not in _files(p)
    assert "merge_freeze" not in (p.memory_dir / "MEMORY.md").read_text()


def test_a_passed_date_the_dream_kept_is_not_paid_again(env: Env) -> None:
    freeze = topic("Merge freeze", "merge freeze for the mobile release until 2026-01-15",
                   "No merges to main until 2026-01-15 (mobile release).", "project")
    p = _folder(env, {**BASE, "project_merge_freeze.md": freeze})
    _dreamt_before(env, p)
    env.stub.responder = lambda body: env.stub.message(env.stub.text("kept: the freeze is still worth knowing"))
    out = dream_project(env.jc(), p)
    assert out.model_called, out
    n = len(env.stub.requests)
    again = dream_project(env.jc(), p)
    assert again.outcome == "unchanged" and len(env.stub.requests) == n, again


def test_a_duplicate_beyond_the_200_file_manifest(env: Env) -> None:
    files = dict(BASE)
    files["project_deploy.md"] = DEPLOY
    p = _folder(env, files)
    os.utime(p.memory_dir / "project_deploy.md", (OLD - 86400, OLD - 86400))  # the oldest file
    for i in range(210):  # newer than it: the manifest's 200 rows never reach it
        _new(p, f"project_area_{i:03d}.md", topic(f"Area {i:03d}", f"facts about subsystem {i:03d}",
                                                  f"Subsystem {i:03d} is owned by team {i % 17}.", "project"),
             index=False)
        os.utime(p.memory_dir / f"project_area_{i:03d}.md", (OLD, OLD))
    idx = p.memory_dir / "MEMORY.md"
    idx.write_text("# Memory\n\n- [Areas](project_area_000.md) — subsystem owners\n" + "".join(
        ln + "\n" for ln in idx.read_text().splitlines() if ln.startswith("- [")))
    os.utime(idx, (OLD, OLD))
    _dreamt_before(env, p)
    _new(p, "project_deploy_new.md", topic(
        "Deploy again", "deploy steps",
        "Deploys go out on Fridays after the 14:00 code freeze. Run make release from main; the on-call "
        "engineer approves the production rollout in Spinnaker.", "project"))
    out, model = _run(env, p)
    assert "/memories/project_deploy.md [" not in _system(model.requests[0])  # not in the manifest
    assert out.outcome == "changed", out
    assert "project_deploy.md" not in _files(p) and "project_deploy_new.md" in _files(p)




def test_a_keyless_dream_changes_no_byte_of_a_healthy_folder(env: Env, monkeypatch: Any) -> None:
    """Evidence and the new reasons to dream (a passed date, sessions, a duplicate) with model work off:
    the deterministic repair only, which leaves a healthy folder byte for byte; no date is marked seen."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    freeze = topic("Merge freeze", "merge freeze for the mobile release until 2026-01-15",
                   "No merges to main until 2026-01-15 (mobile release).", "project")
    p = _folder(env, {**BASE, "project_deploy.md": DEPLOY, "project_merge_freeze.md": freeze})
    _dreamt_before(env, p)
    _new(p, "project_release_process.md", topic(
        "Release process", "release steps and approvals",
        "Deploys go out on Fridays after the 14:00 code freeze. Run make release from main; the on-call engineer "
        "approves the production rollout in Spinnaker.", "project"))
    env.state.touch_session(p.name, SID, time.time() - 60)
    before = {f.name: f.read_bytes() for f in p.memory_dir.rglob("*") if f.is_file()}
    out = dream_project(env.jc(), p)
    assert not out.model_called and out.details.get("model_off"), out
    assert {f.name: f.read_bytes() for f in p.memory_dir.rglob("*") if f.is_file()} == before
    assert env.stub.requests == [] and env.state.get("dream.dates_seen." + p.name) is None
