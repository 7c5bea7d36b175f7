"""Memory use read from transcripts (issue 31): index loads, reads, recalls, writes and weak Bash signals,
in the record shapes Claude Code 2.1.332 writes (copied from a transcript of the real CLI, paths aside),
counted once however often a transcript is read; and the evidence computed from a folder (pure)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memd import layout
from memd.config import Config
from memd.core import evidence as ev
from memd.state import StateStore
from memd.transcripts.scan import scan_project
from tests.plugins.transcripts import TranscriptWriter, assistant, tool_use, user

CFG = Config()
SID = "11111111-2222-4333-8444-555555555555"
CWD = "/nowhere/app"


def _att(attachment: dict[str, Any], uuid: str = "a0000000-0000-4000-8000-000000000001") -> dict[str, Any]:
    rec = user("x", cwd=CWD, session=SID)
    rec.pop("message")
    rec.update(type="attachment", attachment=attachment, uuid=uuid)
    return rec


def _result(tid: str, text: str, tur: Any, *, is_error: bool = False) -> dict[str, Any]:
    rec = user([{"type": "tool_result", "tool_use_id": tid, "content": text, "is_error": is_error}], cwd=CWD,
               session=SID)
    rec["toolUseResult"] = tur
    return rec


def _session(md: Path) -> list[dict[str, Any]]:
    deploy, role = str(md / "project_deploy.md"), str(md / "user_role.md")
    return [
        user("when do we deploy?", cwd=CWD, session=SID),
        _att({"type": "instructions", "files": [
            {"path": "/nowhere/app/CLAUDE.md", "type": "Project", "content": "Be brief."},
            {"path": str(md / "MEMORY.md"), "type": "AutoMem", "content": "- [Deploy](project_deploy.md) — Fridays"}]}),
        assistant(tool_use("Read", {"file_path": deploy}, id="toolu_r1"), cwd=CWD, session=SID),
        _result("toolu_r1", "1\t---", {"type": "text", "file": {"filePath": deploy, "content": "---", "numLines": 7}}),
        assistant(tool_use("Read", {"file_path": str(md / "gone.md")}, id="toolu_r2"), cwd=CWD, session=SID),
        _result("toolu_r2", "File does not exist.", "Error: File does not exist.", is_error=True),
        assistant(tool_use("Write", {"file_path": role, "content": "---"}, id="toolu_w1"), cwd=CWD, session=SID),
        _result("toolu_w1", "File created", {"type": "create", "filePath": role, "memdirStamped": True}),
        assistant(tool_use("Edit", {"file_path": deploy, "old_string": "a", "new_string": "b"}, id="toolu_e1"),
                  cwd=CWD, session=SID),
        _result("toolu_e1", "updated", {"filePath": deploy, "oldString": "a", "newString": "b",
                                        "structuredPatch": []}),
        assistant(tool_use("Bash", {"command": f"cat {deploy}", "description": "x"}, id="toolu_b1"), cwd=CWD,
                  session=SID),
        _result("toolu_b1", "---", {"stdout": "---", "stderr": ""}),
        _att({"type": "relevant_memories", "memories": [{"path": role, "content": "x"}]},
             uuid="a0000000-0000-4000-8000-000000000002"),
        # paths inside other record types are never uses
        {"type": "api-request-blob", "sessionId": SID, "hash": "h", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_x", "name": "Read", "input": {"file_path": role}}]}},
        {"type": "file-history-snapshot", "snapshot": {"trackedFileBackups": {role: {}}}},
        _att({"type": "prompt_snapshot", "files": [{"path": role, "type": "AutoMem"}]},
             uuid="a0000000-0000-4000-8000-000000000003"),
    ]


def _figures(store: StateStore, name: str) -> tuple[int, dict[str, dict[str, Any]]]:
    uses = store.memory_uses(name)
    return len(store.index_loads(name)), {k: {x: v[x] for x in ("reads", "recalls", "writes", "weak")}
                                         for k, v in uses.items()}


EXPECTED = {"project_deploy.md": {"reads": 1, "recalls": 0, "writes": 1, "weak": 1},
            "user_role.md": {"reads": 0, "recalls": 1, "writes": 1, "weak": 0}}


def test_each_use_is_counted_once_however_often_the_transcript_is_read(claude_home: Path,
                                                                       transcript: TranscriptWriter,
                                                                       tmp_path: Path) -> None:
    folder = layout.folder_for_cwd(CWD)
    md = claude_home / "projects" / folder / "memory"
    md.mkdir(parents=True)
    p = transcript.session(claude_home, CWD, _session(md), SID)
    proj = layout.project_for_folder(claude_home, claude_home / "projects" / folder)
    with StateStore.open(tmp_path / "state") as store:
        scan_project(proj, store, CFG, now=time.time())
        assert _figures(store, folder) == (1, EXPECTED)
        scan_project(proj, store, CFG, now=time.time())  # nothing new
        # the file rewritten whole (read again from 0) and then a resumed session loading the index again
        data = p.read_bytes()
        p.unlink()
        p.write_bytes(data)
        scan_project(proj, store, CFG, now=time.time())
        transcript.append(p, [_att({"type": "instructions", "files": [{"path": str(md / "MEMORY.md"),
                                                                        "type": "AutoMem", "content": ""}]},
                                   uuid="a0000000-0000-4000-8000-000000000009")])
        scan_project(proj, store, CFG, now=time.time())
        assert _figures(store, folder) == (1, EXPECTED)
        # the state is kept when Claude Code deletes the transcript
        p.unlink()
        scan_project(proj, store, CFG, now=time.time())
        assert _figures(store, folder) == (1, EXPECTED)
        assert store.memory_uses(folder)["user_role.md"]["last_seen"] is not None


def test_a_use_whose_answer_lands_in_a_later_pass_is_counted(claude_home: Path, transcript: TranscriptWriter,
                                                             tmp_path: Path) -> None:
    folder = layout.folder_for_cwd(CWD)
    md = claude_home / "projects" / folder / "memory"
    md.mkdir(parents=True)
    recs = _session(md)
    p = transcript.session(claude_home, CWD, recs[:3], SID)  # the Read's tool_use, not its answer
    proj = layout.project_for_folder(claude_home, claude_home / "projects" / folder)
    with StateStore.open(tmp_path / "state") as store:
        scan_project(proj, store, CFG, now=time.time())
        assert store.memory_uses(folder) == {}
        transcript.append(p, recs[3:4])
        scan_project(proj, store, CFG, now=time.time())
        assert store.memory_uses(folder)["project_deploy.md"]["reads"] == 1


# ----------------------------------------------------------------------------- the pure evidence


def _doc(rel: str, desc: str, body: str) -> ev.Doc:
    return ev.Doc(rel, desc, body)


FOLDER = [
    _doc("project_deploy.md", "how releases are deployed",
         "Deploys go out on Fridays after the 14:00 code freeze. Run `make release` from main; the on-call "
         "engineer approves the production rollout in Spinnaker."),
    _doc("notes_jan.md", "Notes from the January testing session",
         "We tested the checkout flow with the new payment provider. Deploys go out on Fridays after the 14:00 "
         "code freeze; run make release from main and the on-call engineer approves the production rollout in "
         "Spinnaker. The staging database was reset twice."),
    _doc("user_role.md", "the user is a backend engineer", "The user is a backend engineer who owns billing."),
    _doc("feedback_tests.md", "run the unit tests before committing",
         "Always run pytest -q before a commit. Why: CI takes 40 minutes."),
    _doc("reference_grafana.md", "dashboards in Grafana", "Latency dashboards live at grafana.internal/d/api."),
]


def test_a_duplicate_behind_a_vague_description_is_found_and_nothing_else() -> None:
    pairs = ev.near_duplicates(FOLDER)
    assert [(p.a, p.b) for p in pairs] == [("notes_jan.md", "project_deploy.md")]
    assert "spinnaker" in pairs[0].shared or "friday" in pairs[0].shared


def _folder_of(n: int) -> list[ev.Doc]:
    import random

    rng = random.Random(n)
    words = [f"w{i}" for i in range(n * 4 // 3)]  # each word in about 22 files, whatever the size
    return [_doc(f"f{i}.md", f"topic {words[i]}", " ".join(rng.choice(words) for _ in range(30))
                 + " common shared words everywhere") for i in range(n)]


def test_near_duplicates_is_linear_in_the_folder() -> None:
    """Twice the files, about twice the time (the postings cap: a word in every file pairs no files)."""
    def best(n: int) -> float:
        docs = _folder_of(n)
        times = []
        for _ in range(5):  # CPU time, the best of five: the machine may be shared
            t = time.process_time()
            ev.near_duplicates(docs)
            times.append(time.process_time() - t)
        return min(times)

    small, large = best(150), best(300)
    assert large / small < 4.5, (small, large)  # the work doubles (dict growth adds some); quadratic: 4x work, 5x+ time


def test_passed_dates() -> None:
    d = _doc("project_merge_freeze.md", "Merge freeze for the mobile release until 2026-01-15",
             "No merges to main until Jan 15, 2026.\n```\nuntil 2020-01-01\n```\nReview by 2027-02-01.")
    got = ev.passed_dates(d, "2026-12-03")
    assert [(x.date, x.phrase) for x in got] == [("2026-01-15", "freeze for the mobile release until 2026-01-15")]
    assert ev.passed_dates(d, "2026-01-15") == []  # the day itself has not passed
    assert ev.passed_dates(_doc("a.md", "released on 2026-01-02", "Shipped 2026-01-02."), "2026-12-03") == []
    # a state word with a bare date names when it began, not a limit (the real data's project_portfolio_blockers.md)
    assert ev.passed_dates(_doc("b.md", "portfolio blockers", "## Portfolio Deploy Blocked (2026-03-15)\n"
                                "Paused 2026-03-10, frozen on 2026-03-11."), "2026-12-03") == []
    assert [x.date for x in ev.passed_dates(_doc("c.md", "a pause", "Deploys paused until 2026-03-20."),
                                             "2026-12-03")] == ["2026-03-20"]


def test_never_used_needs_enough_loads_and_skips_new_files() -> None:
    loads = [100.0 * i for i in range(1, 11)]  # ten sessions loaded the index, at 100..1000
    born = {"old.md": 50.0, "read.md": 50.0, "new.md": 950.0}
    uses = {"read.md": ev.Use(reads=1, last_seen=990.0)}
    assert ev.never_used(uses, born, loads, 10) == ["old.md"]
    assert ev.never_used(uses, born, loads, 11) == []  # too little evidence yet
    assert ev.least_used(["read.md", "old.md"], uses) == ["old.md", "read.md"]


def test_the_state_migration_keeps_counts_apart_per_project(tmp_path: Path) -> None:
    with StateStore.open(tmp_path) as s:
        assert s.record_uses("p", "s1", [("load", "", "", 1.0), ("read", "t1", "a.md", 2.0)]) == 2
        assert s.record_uses("p", "s1", [("load", "", "", 3.0), ("read", "t1", "a.md", 2.0)]) == 0
        assert s.record_uses("q", "s2", [("read", "t1", "a.md", 2.0)]) == 1
        assert s.index_loads("p") == [1.0] and s.index_loads("q") == []
        assert json.dumps(s.memory_uses("p")["a.md"]) == json.dumps(
            {"reads": 1, "recalls": 0, "writes": 0, "weak": 0, "last_seen": 2.0})
        from memd.state import RUNS_KEEP_S

        s.record_uses("p", "s9", [("read", "t9", "b.md", 1e9)])
        assert s.prune_memory_use(1e9 + RUNS_KEEP_S - 1) == 3  # older than a year and more: gone
        assert set(s.memory_uses("p")) == {"b.md"}


def test_status_and_the_viewer_show_what_waits_for_the_dream(claude_home: Path,
                                                              capsys: Any) -> None:
    from memd import cli
    from memd.config import load
    from memd.layout import project_for_folder
    from memd.ui.views import project_page

    md = claude_home / "projects" / "-home-u-app" / "memory"
    md.mkdir(parents=True)
    (md / "MEMORY.md").write_text("- [Freeze](project_freeze.md) — merge freeze until 2026-01-15\n"
                                  "- [Role](user_role.md) — backend engineer\n")
    (md / "project_freeze.md").write_text("---\nname: Freeze\ndescription: merge freeze until 2026-01-15\n"
                                          "type: project\n---\nNo merges to main until 2026-01-15.\n")
    (md / "user_role.md").write_text("---\nname: Role\ndescription: backend engineer\ntype: user\n---\nBackend.\n")
    old = time.time() - 86400 * 30
    for f in md.iterdir():
        os.utime(f, (old, old))
    state_dir = Path(os.environ["XDG_STATE_HOME"]) / "memd"
    with StateStore.open(state_dir) as s:
        for n in range(20):
            s.record_uses("-home-u-app", f"s{n}", [("load", "", "", time.time() - 3600 + n)])
        s.record_uses("-home-u-app", "s1", [("read", "t1", "user_role.md", time.time() - 100)])
    assert cli.main(["status", "--format", "json"]) in (0, 1)
    doc = json.loads(capsys.readouterr().out)
    ev_ = next(p for p in doc["projects"] if p["project"] == "-home-u-app")["evidence"]
    assert ev_["unused"] == ["project_freeze.md"] and ev_["dated"] == [["project_freeze.md", "2026-01-15"]]
    cli.main(["status"])
    out = capsys.readouterr().out
    assert ("-home-u-app: waiting for the dream: 1 memory whose date has passed; 1 memory unused in the last 20 "
            "sessions that loaded the index (project_freeze.md)") in out
    cfg = load(None)
    page = project_page(project_for_folder(claude_home, claude_home / "projects" / "-home-u-app"), cfg, state_dir)
    assert page.evidence["unused"] == ["project_freeze.md"]


def test_the_viewer_shows_what_waits_for_the_dream(claude_home: Path) -> None:
    """The project page served over HTTP lists the unused memory and the passed date (issue 31)."""
    import http.client
    from urllib.parse import urlsplit

    from memd.commands.ui import pages
    from memd.ui.server import COOKIE, Running, Viewer
    from tests.test_ui import _ctx

    md = claude_home / "projects" / "-home-u-app" / "memory"
    md.mkdir(parents=True)
    (md / "MEMORY.md").write_text("- [Freeze](project_freeze.md) — merge freeze until 2026-01-15\n")
    (md / "project_freeze.md").write_text("---\nname: Freeze\ndescription: merge freeze until 2026-01-15\n"
                                          "type: project\n---\nNo merges to main until 2026-01-15.\n")
    old = time.time() - 86400 * 30
    for f in md.iterdir():
        os.utime(f, (old, old))
    with StateStore.open(Path(os.environ["XDG_STATE_HOME"]) / "memd") as s:
        for n in range(20):
            s.record_uses("-home-u-app", f"s{n}", [("load", "", "", time.time() - 3600 + n)])
    with Running(Viewer(pages(_ctx(claude_home)))) as url:
        u = urlsplit(url)
        conn = http.client.HTTPConnection(u.hostname or "", u.port, timeout=30)
        conn.request("GET", "/project/-home-u-app", headers={
            "Host": u.netloc, "Cookie": f"{COOKIE}_{u.port}={url.split('token=', 1)[1]}"})
        resp = conn.getresponse()
        page = resp.read().decode()
        conn.close()
    assert resp.status == 200
    assert 'id="evidence"' in page and '<code class="unused-file">project_freeze.md</code>' in page
    assert "states a date that has passed (2026-01-15)" in page


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.tuples(st.integers(min_value=0, max_value=40), st.booleans()), max_size=8),
       replace_at=st.sets(st.integers(min_value=0, max_value=6)))
def test_counts_are_the_same_however_the_transcript_arrives(claude_home: Path, tmp_path_factory: Any,
                                                            cuts: list[tuple[int, bool]],
                                                            replace_at: set[int]) -> None:
    """The transcript written in chunks cut anywhere (mid-line too), scanned after each, the file sometimes
    replaced by a copy (read again from 0): the counts are those of one scan of the whole file (a Bash
    mention whose answer lands in a later pass may be lost: a weak signal, never counted twice)."""
    folder = layout.folder_for_cwd(CWD)
    md = claude_home / "projects" / folder / "memory"
    md.mkdir(parents=True, exist_ok=True)
    tmp = tmp_path_factory.mktemp("s")
    lines = [json.dumps(r).encode() + b"\n" for r in _session(md)]
    data = b"".join(lines)
    ends = [sum(len(x) for x in lines[:i + 1]) for i in range(len(lines))]  # a pass may end after any line
    p = claude_home / "projects" / folder / f"{SID}.jsonl"
    p.unlink(missing_ok=True)
    proj = layout.project_for_folder(claude_home, claude_home / "projects" / folder)
    points = sorted({ends[i % len(ends)] - (len(lines[i % len(ends)]) // 2 if mid else 0) for i, mid in cuts}
                    | {len(data)})
    with StateStore.open(tmp / "state") as store:
        for i, end in enumerate(points):
            if i in replace_at and p.exists():
                body = p.read_bytes()
                p.unlink()
                p.write_bytes(body)
            cur = p.stat().st_size if p.exists() else 0
            with open(p, "ab") as f:
                f.write(data[cur:end])
            scan_project(proj, store, CFG, now=time.time())
        loads, figures = _figures(store, folder)
    assert loads == 1
    for rel, want in EXPECTED.items():
        got = figures[rel]
        kinds = ("reads", "recalls", "writes")
        assert {k: got[k] for k in kinds} == {k: want[k] for k in kinds}
        assert got["weak"] <= want["weak"]


def test_status_bounds_the_time_it_spends_computing_evidence(claude_home: Path, capsys: Any,
                                                              monkeypatch: Any) -> None:
    """Past its share of time, status names the projects it did not compute; a project named computes
    its evidence whatever the time, and status shows it from then on (kept in the state)."""
    from memd import cli
    from memd.commands import status

    md = claude_home / "projects" / "-home-u-app" / "memory"
    md.mkdir(parents=True)
    (md / "MEMORY.md").write_text("- [Freeze](project_freeze.md) — merge freeze until 2026-01-15\n")
    (md / "project_freeze.md").write_text("---\nname: Freeze\ndescription: merge freeze until 2026-01-15\n"
                                          "type: project\n---\nNo merges to main until 2026-01-15.\n")
    monkeypatch.setattr(status, "EVIDENCE_MIN_S", 0.0)
    monkeypatch.setattr(status, "EVIDENCE_SHARE", 0.0)
    cli.main(["status"])
    assert "not computed yet for 1 project(s)" in capsys.readouterr().out
    cli.main(["status", "-home-u-app"])
    assert "-home-u-app: waiting for the dream: 1 memory whose date has passed" in capsys.readouterr().out
    monkeypatch.setattr(status, "EVIDENCE_MIN_S", 0.25)
    cli.main(["status"])
    out = capsys.readouterr().out
    assert "1 memory whose date has passed" in out and "not computed yet" not in out
