"""A catch-up into a full index makes room where it is safe (issue 24): an index over its budget in
characters condenses the hooks that only repeat their file's description, so the run's new file gets
its line; an index full in lines cannot be condensed: the file is kept without its line, and that shows
in ``memd status`` and ``memd report`` (the warning ``index_held_back``), not only in the run's actions."""

from __future__ import annotations

import time

from memd.core import index as mindex
from memd.core.rebuild import REPAIR, TopicInfo, plan_rebuild
from memd.daemon import info
from memd.jobs import checkin
from memd.jobs.catchup import catchup_project
from memd.jobs.modelrun import HELD_BACK_WARNING
from memd.layout import Project
from tests import test_model_jobs
from tests.test_model_jobs import Env, _fake_session, _full_index_project, _user, topic

env = test_model_jobs.env  # the model-job tests' fixture, shared


def _desc(i: int) -> str:
    return f"how service {i:03d} is deployed, monitored and rolled back, with its owners and its on-call rota"


def _line(i: int) -> str:
    return f"- [Service {i:03d}](project_service_{i:03d}.md) — {_desc(i)}\n"


N = 25_000 // len(_line(0))  # as many lines of ~140 characters as the 25,000 allow: full in characters


def _chars_full(env: Env) -> Project:
    """An index full in characters (not in lines), every hook its file's description; a session with
    a new fact."""
    p = env.project("-home-dev-chars")
    files = {"MEMORY.md": "".join(_line(i) for i in range(N))}
    files |= {f"project_service_{i:03d}.md": topic(f"Service {i:03d}", _desc(i), f"fact {i}", "project")
              for i in range(N)}
    env.memory(p, files)
    _fake_session(p.dir / "11111111-2222-3333-4444-777777777777.jsonl",
                  [_user("Deploys now need the VPN, remember that.")])
    return p


def _vpn(env: Env) -> None:
    s = env.stub
    s.script(s.message(s.memory("create", path="/memories/project_vpn.md",
                                file_text=topic("VPN", "deploys need the VPN", "Deploys need the VPN.", "project"))),
             s.message(s.text("saved")))


def test_an_index_full_in_characters_condenses_repeated_descriptions_to_make_room(env: Env) -> None:
    p = _chars_full(env)
    b = env.config.budget
    before = (p.memory_dir / "MEMORY.md").read_text()
    assert mindex.measure(before + "x" * 150 + "\n", b.max_lines, b.max_chars, b.warn_ratio).level == "over"
    _vpn(env)
    out = catchup_project(env.jc(), p)
    assert out.outcome == "changed", out
    text = (p.memory_dir / "MEMORY.md").read_text()
    assert "(project_vpn.md)" in text  # the new file has its line (before: kept unindexed)
    assert mindex.measure(text, b.max_lines, b.max_chars, b.warn_ratio).level != "over"
    condensed = [a for a in out.details["rebuild"] if a.startswith("condensed entry")]
    assert condensed and all("description holds it" in a for a in condensed)
    # every line is still there, linking its file; a condensed hook is the start of the description
    for i in range(N):
        line = next(x for x in text.splitlines() if f"(project_service_{i:03d}.md)" in x)
        hook = line.split(" — ", 1)[1].removesuffix("…").rstrip()
        assert _desc(i).startswith(hook)
    assert "held_back" not in out.details
    assert not [w for w in env.state.warnings(p.name) if w.kind == HELD_BACK_WARNING]


def test_an_index_full_in_lines_keeps_the_file_unindexed_and_says_so_in_status_and_report(env: Env) -> None:
    p, _ = _full_index_project(env)
    before = (p.memory_dir / "MEMORY.md").read_text()
    _vpn(env)
    out = catchup_project(env.jc(), p)
    assert out.outcome == "changed", out
    assert (p.memory_dir / "MEMORY.md").read_text() == before  # nothing condensed: a line is a line
    assert out.details["held_back"] == ["project_vpn.md"]
    (w,) = [w for w in env.state.warnings(p.name) if w.kind == HELD_BACK_WARNING]
    assert "project_vpn.md" in w.details["reason"] and w.details["files"] == 1
    lines = info.warning_lines(info.daemon_status(env.state_dir, env.config)["warnings"])
    assert any(HELD_BACK_WARNING in x and "project_vpn.md" in x for x in lines), lines  # memd status
    now = time.time()
    report = checkin.build_report(env.state, now=now, since=now - 86_400).markdown
    assert HELD_BACK_WARNING in report and "project_vpn.md" in report  # memd report
    # room is made (the user removes ten notes): the next run indexes the file and closes the warning
    text = "".join(x + "\n" for x in before.splitlines() if not any(f"(project_note_{i}.md)" in x for i in range(10)))
    (p.memory_dir / "MEMORY.md").write_text(text)
    for i in range(10):
        (p.memory_dir / f"project_note_{i}.md").unlink()
    _fake_session(p.dir / "11111111-2222-3333-4444-999999999997.jsonl", [_user("Deploys start at 9.")])
    s = env.stub
    s.script(s.message(s.memory("str_replace", path="/memories/project_deploy.md", old_str="Deploys happen on Fridays.",
                                new_str="Deploys happen on Fridays at 9.")), s.message(s.text("saved")))
    out = catchup_project(env.jc(), p)
    assert "(project_vpn.md)" in (p.memory_dir / "MEMORY.md").read_text(), out
    assert not [w for w in env.state.warnings(p.name) if w.kind == HELD_BACK_WARNING]


def test_condensing_never_touches_a_hook_with_words_of_its_own() -> None:
    """The pure rule: only hooks whose words the linked file's description holds are cut."""
    own = ("- [Service 000](project_service_000.md) — restart order: db, api, web; ask Dana before touching "
           "the replica set or its nightly backups!\n")
    assert len(own) >= len(_line(0))
    rows = [_line(i) for i in range(1, N)]
    topics = {f"project_service_{i:03d}.md": TopicInfo(f"project_service_{i:03d}.md", name=f"Service {i:03d}",
                                                       description=_desc(i)) for i in range(N)}
    topics["new.md"] = TopicInfo("new.md", name="New", description="a new fact")
    plan = plan_rebuild(own + "".join(rows), topics, mode=REPAIR, condense=True)
    assert plan.fits and own in plan.text and "(new.md)" in plan.text
    assert any(a.startswith("condensed entry") for a in plan.actions)
    plain = plan_rebuild(own + "".join(rows), topics, mode=REPAIR)
    assert not plain.fits  # without condensing the new line does not fit


def test_the_files_kept_without_a_line_are_the_least_used(env: Env) -> None:
    """Issue 31: when not every unindexed file's line fits, the ones kept out are those sessions used least
    (the scan's counts), not the last by name; a file used alike keeps the old order."""
    p = env.project("-home-dev-room")
    files = {"MEMORY.md": "".join(f"- [N {i}](project_note_{i:03d}.md) — note {i}\n" for i in range(198))}
    files |= {f"project_note_{i:03d}.md": topic(f"N {i}", f"note {i}", f"fact {i}", "project") for i in range(198)}
    for rel in ("project_a_unused.md", "project_m_used.md", "project_z_used.md"):
        files[rel] = topic(rel, f"about {rel}", f"body of {rel}", "project")
    env.memory(p, files)
    env.state.record_uses(p.name, "s1", [("read", "t1", "project_m_used.md", time.time() - 100),
                                         ("read", "t2", "project_z_used.md", time.time() - 50)])
    _fake_session(p.dir / "11111111-2222-3333-4444-777777777771.jsonl", [_user("note 1 is now fact one.")])
    s = env.stub
    s.script(s.message(s.memory("str_replace", path="/memories/project_note_001.md", old_str="fact 1",
                                new_str="fact one")), s.message(s.text("saved")))
    out = catchup_project(env.jc(), p)
    text = (p.memory_dir / "MEMORY.md").read_text()
    assert "(project_m_used.md)" in text and "(project_z_used.md)" in text, out
    assert "(project_a_unused.md)" not in text
