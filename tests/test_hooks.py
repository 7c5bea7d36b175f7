"""The real `memd hook` process: event JSON on stdin, its JSON answer on stdout (facts.md section 5)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugins.hooks import ROOT, SCRIPT, HookProject, index_text, run_hook, topic

pytestmark = pytest.mark.slow

AWS_KEY = "AKIA" + "Q3EXAMPLEZ7Y4BQW"  # built at run time: no secret-shaped literal in the repo


def assert_silent(run: object) -> None:
    assert getattr(run, "rc", None) == 0, run
    assert getattr(run, "out", None) == "", run


# --------------------------------------------------------------------------- PreToolUse


@pytest.mark.parametrize("script", [False, True], ids=["python -m memd", "console script"])
def test_pre_denies_a_secret_written_into_memory(hook_project: HookProject, script: bool) -> None:
    if script and not SCRIPT.exists():
        pytest.skip("no console script in this environment")
    ev = hook_project.write_event("PreToolUse", hook_project.memory / "reference_aws.md",
                                  topic(body=f"the deploy key is {AWS_KEY}\n"))
    run = run_hook(ev, script=script)
    assert run.rc == 0
    hso = run.answer["hookSpecificOutput"]
    assert hso["hookEventName"] == "PreToolUse"
    assert hso["permissionDecision"] == "deny"
    assert "AWS access key" in hso["permissionDecisionReason"]
    assert AWS_KEY not in run.out  # the reason names the kind, never the secret
    # logged with the kind only
    lines = [x for x in hook_project.log_lines() if x["event"] == "hook.denied"]
    assert lines and lines[-1]["kinds"] == ["AWS access key"]
    assert AWS_KEY not in (hook_project.state / "memd.log").read_text()


def test_pre_is_silent_for_clean_memory_and_for_other_files(hook_project: HookProject) -> None:
    assert_silent(run_hook(hook_project.write_event("PreToolUse", hook_project.memory / "user_role.md",
                                                    topic(body="The user is a data scientist.\n"))))
    # a secret outside memory is none of memd's business: no answer, the normal flow decides
    assert_silent(run_hook(hook_project.write_event("PreToolUse", hook_project.work / "deploy.env",
                                                    f"KEY={AWS_KEY}\n")))
    # a read-only tool into memory
    ev = hook_project.event("PreToolUse", tool_name="Read",
                            tool_input={"file_path": str(hook_project.memory / "MEMORY.md")})
    assert_silent(run_hook(ev))


@pytest.mark.parametrize("tool", ["Edit", "MultiEdit"])
def test_pre_checks_edit_and_multiedit_new_text(hook_project: HookProject, tool: str) -> None:
    ev = hook_project.write_event("PreToolUse", hook_project.memory / "project_x.md",
                                  f"aws: {AWS_KEY}", tool=tool)
    run = run_hook(ev)
    reason = run.answer["hookSpecificOutput"]["permissionDecisionReason"]
    assert "AWS access key" in reason
    if tool == "MultiEdit":
        assert "edit 2" in reason


def test_pre_resolves_relative_paths_against_the_session_cwd(hook_project: HookProject) -> None:
    rel = os.path.relpath(hook_project.memory / "x.md", hook_project.work)
    ev = hook_project.write_event("PreToolUse", rel, f"k {AWS_KEY}")
    assert run_hook(ev).answer["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_pre_follows_a_symlinked_claude_folder(hook_project: HookProject) -> None:
    link = hook_project.work.parent / "claude-link"
    link.symlink_to(hook_project.claude)
    path = link / hook_project.memory.relative_to(hook_project.claude) / "x.md"
    ev = hook_project.write_event("PreToolUse", path, f"k {AWS_KEY}")
    assert run_hook(ev).answer["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_pre_guards_the_auto_memory_directory_override(hook_project: HookProject) -> None:
    elsewhere = hook_project.work.parent / "my-memory"
    elsewhere.mkdir()
    (hook_project.claude / "settings.json").write_text(json.dumps({"autoMemoryDirectory": str(elsewhere)}))
    ev = hook_project.write_event("PreToolUse", elsewhere / "notes.md", f"k {AWS_KEY}")
    assert run_hook(ev).answer["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_team_memory_is_strict_about_personal_data(hook_project: HookProject) -> None:
    contact = "Reach Dana at dana.k" + "@corp-mail.io or +1 415 555 0199.\n"
    team = hook_project.memory / "team" / "reference_contacts.md"
    run = run_hook(hook_project.write_event("PreToolUse", team, topic(body=contact)))
    reason = run.answer["hookSpecificOutput"]["permissionDecisionReason"]
    assert "e-mail address" in reason and "phone number" in reason
    assert "dana.k" not in reason
    # the same text in the user's own memory is allowed (personal data is only checked in team/)
    assert_silent(run_hook(hook_project.write_event("PreToolUse", hook_project.memory / "c.md", contact)))
    # and hooks.team_pii = false turns the personal-data rules off
    hook_project.set_config("[hooks]\nteam_pii = false\n")
    assert_silent(run_hook(hook_project.write_event("PreToolUse", team, topic(body=contact))))


# --------------------------------------------------------------------------- PostToolUse


def test_post_is_silent_when_the_index_is_fine(hook_project: HookProject) -> None:
    (hook_project.memory / "MEMORY.md").write_text(index_text(20))
    f = hook_project.memory / "topic_1.md"
    f.write_text(topic())
    assert_silent(run_hook(hook_project.write_event("PostToolUse", f, topic())))
    # other files never get an answer, whatever the memory looks like
    assert_silent(run_hook(hook_project.write_event("PostToolUse", hook_project.work / "a.py", "x")))


def test_post_near_the_budget_asks_to_condense(hook_project: HookProject) -> None:
    (hook_project.memory / "MEMORY.md").write_text(index_text(170))
    run = run_hook(hook_project.write_event("PostToolUse", hook_project.memory / "MEMORY.md", "x"))
    ctx = run.context
    assert run.answer["hookSpecificOutput"]["hookEventName"] == "PostToolUse"
    assert "near the budget" in ctx and "172 of 200 lines" in ctx
    assert "one line per entry" in ctx and "topic files" in ctx and "merge or delete" in ctx
    # the threshold is a config key
    hook_project.set_config("[hooks]\nnear_ratio = 0.9\n")
    assert_silent(run_hook(hook_project.write_event("PostToolUse", hook_project.memory / "MEMORY.md", "x")))


def test_post_over_the_budget_names_the_invisible_entries(hook_project: HookProject) -> None:
    (hook_project.memory / "MEMORY.md").write_text(index_text(230))
    f = hook_project.memory / "feedback_new.md"
    f.write_text(topic())
    ctx = run_hook(hook_project.write_event("PostToolUse", f, topic())).context
    assert "OVER the budget" in ctx
    assert "Entry 197 (" not in ctx  # line 200 is still loaded
    assert "Entry 198 (topic_198.md, line 201)" in ctx and "Entry 229 (topic_229.md, line 232)" in ctx
    assert "These 32 index entries" in ctx
    assert len(ctx) <= 10_000


def test_post_output_stays_under_claude_codes_cap(hook_project: HookProject) -> None:
    (hook_project.memory / "MEMORY.md").write_text(index_text(2000, hook="x" * 140))
    ctx = run_hook(hook_project.write_event("PostToolUse", hook_project.memory / "MEMORY.md", "x")).context
    assert len(ctx) <= 10_000
    assert "… and" in ctx and "more" in ctx


def test_post_notes_topic_files_without_description_or_type(hook_project: HookProject) -> None:
    (hook_project.memory / "MEMORY.md").write_text(index_text(3))
    f = hook_project.memory / "project_thing.md"
    f.write_text(topic(description=None, mtype=None))
    ctx = run_hook(hook_project.write_event("PostToolUse", f, "x")).context
    assert "project_thing.md has no description or type" in ctx
    f.write_text("just a body, no frontmatter\n")
    assert "has no frontmatter" in run_hook(hook_project.write_event("PostToolUse", f, "x")).context
    # nested metadata shape counts as typed
    f.write_text("---\nname: t\ndescription: d\nmetadata:\n  type: project\n---\nbody\n")
    assert_silent(run_hook(hook_project.write_event("PostToolUse", f, "x")))


def test_post_notes_long_index_lines(hook_project: HookProject) -> None:
    text = index_text(3) + "- [Long](long.md) — " + "detail " * 30 + "\n"
    (hook_project.memory / "MEMORY.md").write_text(text)
    ctx = run_hook(hook_project.write_event("PostToolUse", hook_project.memory / "MEMORY.md", text)).context
    assert "1 line over 150 characters" in ctx and "line 6" in ctx


# --------------------------------------------------------------------------- SessionStart


def test_session_start_over_budget_names_hidden_entries(hook_project: HookProject) -> None:
    (hook_project.memory / "MEMORY.md").write_text(index_text(210))
    run = run_hook(hook_project.event("SessionStart", source="startup", model="claude-sonnet-4-5"))
    hso = run.answer["hookSpecificOutput"]
    assert hso["hookEventName"] == "SessionStart"
    assert "OVER the budget" in hso["additionalContext"]
    assert "Entry 209 (topic_209.md" in hso["additionalContext"]


def test_session_start_is_silent_when_all_is_well(hook_project: HookProject) -> None:
    (hook_project.memory / "MEMORY.md").write_text(index_text(170))  # near is not worth a session note
    assert_silent(run_hook(hook_project.event("SessionStart", source="startup")))
    # a working folder with no memory at all
    other = hook_project.work.parent / "other"
    other.mkdir()
    assert_silent(run_hook(hook_project.event("SessionStart", source="resume", cwd=str(other))))


def test_session_start_shows_the_daemons_open_warnings(hook_project: HookProject) -> None:
    state = pytest.importorskip("memd.state")
    (hook_project.memory / "MEMORY.md").write_text(index_text(5))
    name = hook_project.memory.parent.name
    store = state.StateStore.open(hook_project.state)
    try:
        store.set_warning(name, "topic_files", "over", {"message": "214 topic files; recall reads only 200"})
        store.set_warning(name, "index_links", "warning", {"broken": 3})
        store.set_warning("-some-other-project", "budget", "over", {"lines": 300})
        # read while the daemon holds the store open (WAL mode), and after it closed it
        ctx = run_hook(hook_project.event("SessionStart", source="startup")).context
    finally:
        store.close()
    assert ctx == run_hook(hook_project.event("SessionStart", source="startup")).context
    assert "open warnings" in ctx and "topic_files (over): 214 topic files; recall reads only 200" in ctx
    assert "index_links (warning): broken=3" in ctx
    assert "300" not in ctx  # another project's warning


def test_session_start_with_a_corrupt_state_file_still_reports_the_budget(hook_project: HookProject) -> None:
    (hook_project.memory / "MEMORY.md").write_text(index_text(210))
    hook_project.state.mkdir(parents=True)
    (hook_project.state / "state.sqlite3").write_bytes(b"this is not a database" * 100)
    (hook_project.state / "warnings.json").write_bytes(b'{"broken": ')
    run = run_hook(hook_project.event("SessionStart", source="startup"))
    assert "OVER the budget" in run.context
    # the hook only reads: the daemon's files are not set aside, rebuilt or joined by -wal/-shm files
    assert sorted(p.name for p in hook_project.state.iterdir()) == ["memd.log", "state.sqlite3", "warnings.json"]
    assert (hook_project.state / "state.sqlite3").read_bytes() == b"this is not a database" * 100
    assert any(x["event"] == "hook.session_start.warnings_unreadable" for x in hook_project.log_lines())


# --------------------------------------------------------------------------- never break a session


@pytest.mark.parametrize("stdin", [
    b"", b"not json", b"[1, 2, 3]", b'"a string"', b"{\"hook_event_name\": ", b"\xff\xfe\x00garbage",
    b'{"hook_event_name": 42}', b'{"hook_event_name": "PreToolUse"}',
    b'{"hook_event_name": "PostToolUse", "tool_name": "Write", "tool_input": {"file_path": 7}}',
    b'{"hook_event_name": "SessionStart", "cwd": null}',
    b'{"hook_event_name": "UserPromptSubmit", "prompt": ["x"]}',
], ids=lambda b: b[:30].decode("latin-1"))
def test_malformed_events_exit_0_silently(hook_project: HookProject, stdin: bytes) -> None:
    assert_silent(run_hook(stdin))


def test_a_file_tool_call_without_a_readable_path_is_denied(hook_project: HookProject) -> None:
    """It may aim at memory, and the guard cannot tell (issue 34: fail closed; tests/test_hook_fail_closed.py)."""
    run = run_hook(b'{"hook_event_name": "PreToolUse", "tool_name": "Write", "tool_input": "nope"}')
    assert run.rc == 0 and run.answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "tool_input is a string, not an object" in run.answer["hookSpecificOutput"]["permissionDecisionReason"]


@pytest.mark.parametrize("name", ["Stop", "SubagentStop", "PreCompact", "SessionEnd", "Notification",
                                  "SomethingNewIn2027"])
def test_unknown_or_unhandled_events_exit_0_silently(hook_project: HookProject, name: str) -> None:
    assert_silent(run_hook(hook_project.event(name, reason="exit", trigger="auto")))


def test_a_broken_config_fails_open_and_is_logged(hook_project: HookProject) -> None:
    hook_project.set_config("[hooks\nthis is not toml")
    ev = hook_project.write_event("PostToolUse", hook_project.memory / "MEMORY.md", "x")
    assert_silent(run_hook(ev))
    failed = [x for x in hook_project.log_lines() if x["event"] == "hook.failed"]
    assert failed and "ConfigError" in failed[-1]["error"] and failed[-1]["hook_event"] == "PostToolUse"


def test_a_broken_config_never_turns_the_secret_guard_off(hook_project: HookProject) -> None:
    hook_project.set_config("[hooks\nthis is not toml")
    ev = hook_project.write_event("PreToolUse", hook_project.memory / "x.md", f"k {AWS_KEY}")
    out = run_hook(ev)
    assert out.answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert any(x["event"] == "hook.config_invalid" for x in hook_project.log_lines())


def test_an_edit_that_completes_a_secret_from_pieces_is_denied(hook_project: HookProject) -> None:
    target = hook_project.memory / "notes.md"
    half = len(AWS_KEY) // 2
    target.write_text(f"# notes\nkey: {AWS_KEY[:half]}|\nother\n")
    ev = hook_project.event("PreToolUse", tool_name="Edit", tool_input={
        "file_path": str(target), "old_string": "|", "new_string": AWS_KEY[half:]})
    out = run_hook(ev)
    reason = out.answer["hookSpecificOutput"]["permissionDecisionReason"]
    assert "AWS access key" in reason and "line 2 of the edited file" in reason and AWS_KEY not in reason
    # a file that already holds a secret can still be edited elsewhere (nothing new is completed)
    target.write_text(f"key: {AWS_KEY}\nplain\n")
    ev = hook_project.event("PreToolUse", tool_name="MultiEdit", tool_input={
        "file_path": str(target), "edits": [{"old_string": "plain", "new_string": "plainer"}]})
    assert_silent(run_hook(ev))


def test_bad_arguments_in_settings_fail_open(hook_project: HookProject) -> None:
    assert_silent(run_hook(hook_project.event("SessionStart"), argv=("--bogus",)))


def test_unreadable_memory_files_fail_open(hook_project: HookProject) -> None:
    # MEMORY.md that is a folder, and a topic file that is a dangling symlink (root can read anything,
    # so permissions alone would not make these unreadable in CI)
    (hook_project.memory / "MEMORY.md").mkdir()
    (hook_project.memory / "gone.md").symlink_to(hook_project.memory / "nowhere.md")
    os.mkfifo(hook_project.memory / "pipe.md")  # opening it for reading would block
    assert_silent(run_hook(hook_project.write_event("PostToolUse", hook_project.memory / "gone.md", "x")))
    assert_silent(run_hook(hook_project.write_event("PostToolUse", hook_project.memory / "pipe.md", "x"),
                           timeout=30))
    assert_silent(run_hook(hook_project.event("SessionStart", source="startup")))
    (hook_project.memory / "MEMORY.md").rmdir()
    os.mkfifo(hook_project.memory / "MEMORY.md")
    assert_silent(run_hook(hook_project.event("SessionStart", source="startup"), timeout=30))


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads unreadable folders")
def test_unreadable_memory_folder_fails_open(hook_project: HookProject) -> None:
    (hook_project.memory / "MEMORY.md").write_text(index_text(230))
    hook_project.memory.chmod(0)
    try:
        assert_silent(run_hook(hook_project.write_event("PostToolUse", hook_project.memory / "x.md", "x")))
        assert_silent(run_hook(hook_project.event("SessionStart", source="startup")))
    finally:
        hook_project.memory.chmod(0o755)


def test_unwritable_state_folder_does_not_matter(hook_project: HookProject) -> None:
    hook_project.state.parent.mkdir(parents=True)
    hook_project.state.write_text("a file where the state folder should be")
    run = run_hook(hook_project.write_event("PreToolUse", hook_project.memory / "x.md", f"k {AWS_KEY}"))
    assert run.answer["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_usage_on_a_terminal_and_help(hook_project: HookProject) -> None:
    run = run_hook(b"", argv=("--help",))
    assert run.rc == 0 and "usage: memd hook" in run.out


# --------------------------------------------------------------------------- staying light


HEAVY = ("yaml", "anthropic", "structlog", "sqlite3", "watchdog", "apscheduler", "dulwich", "httpx2")


def imported(stderr: str) -> set[str]:
    out = set()
    for line in stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+\d+ \|\s*(\S+)", line)
        if m:
            out.add(m.group(1))
    return out


@pytest.mark.parametrize("name", ["PreToolUse", "PostToolUse"])
@pytest.mark.parametrize("where", ["memory", "elsewhere"])
def test_tool_hooks_import_nothing_heavy(hook_project: HookProject, name: str, where: str) -> None:
    (hook_project.memory / "MEMORY.md").write_text(index_text(230))
    target = hook_project.memory / "feedback_x.md" if where == "memory" else hook_project.work / "x.md"
    target.write_text(topic(description=None))
    run = run_hook(hook_project.write_event(name, target, f"k {AWS_KEY}"), python_flags=("-X", "importtime"))
    assert run.rc == 0
    if where == "memory":
        assert run.out  # the path did its work (a deny or a note)...
    mods = imported(run.err)
    tops = {m.split(".")[0] for m in mods}
    assert "memd.hooks.context" in mods  # (importlib.import_module itself is not timed)
    assert not tops & set(HEAVY), tops & set(HEAVY)  # ...without any heavy module
    # ...nor the stdlib's slow starters: dataclasses (and inspect, ast, dis under it) and typing are
    # kept off the path (memd.record, TYPE_CHECKING imports), tomllib is needed only with a config
    # file (there is none here). Together they made a memory write cost 2.5x a bare interpreter.
    slow = {"dataclasses", "inspect", "typing", "tomllib"} & mods
    assert not slow, slow
    if where == "memory":
        # no config file: its defaults, read without importing the schema (memd.hooks.defaults)
        assert "memd.hooks.defaults" in mods and "memd.config" not in mods
        assert ("memd.core.secrets" in mods) is (name == "PreToolUse")  # only PreToolUse scans
    else:
        assert not {"tomllib", "memd.config"} & mods
    # pathlib too (memd.layout is left to the other events): here the editable install's finder has
    # loaded it at start-up already, so look again without site, as a plain install would start.
    bare = run_hook(hook_project.write_event(name, target, f"k {AWS_KEY}"), python_flags=("-S", "-X", "importtime"))
    assert (bare.rc, bare.out) == (run.rc, run.out)
    slow = {"pathlib", "memd.layout", "dataclasses", "typing", "tomllib"} & imported(bare.err)
    assert not slow, slow


def test_a_closed_stdout_still_exits_0(hook_project: HookProject) -> None:
    ev = hook_project.write_event("PreToolUse", hook_project.memory / "x.md", f"k {AWS_KEY}")
    r, w = os.pipe()
    os.close(r)  # Claude Code gave up on the hook: writing the answer fails with EPIPE
    try:
        proc = subprocess.run([sys.executable, "-m", "memd", "hook"], input=json.dumps(ev).encode(), stdout=w,
                              stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60,
                              check=False)
    finally:
        os.close(w)
    assert proc.returncode == 0 and proc.stderr == b""


def test_real_memory_folders(claude_data: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every memory file of the shared data through PostToolUse and PreToolUse (in-process, fast)."""
    from memd.config import Config
    from memd.hooks.context import HookContext
    from memd.hooks.tool_use import post_tool_use, pre_tool_use

    claude = claude_data
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    hc = HookContext(claude_dir=str(claude))
    hc._config = Config()
    files = sorted(claude.glob("projects/*/memory/**/*.md"))
    notes = 0
    for f in files:
        ev = {"hook_event_name": "PostToolUse", "tool_name": "Edit", "cwd": "/",
              "tool_input": {"file_path": str(f), "old_string": "a", "new_string": "b"}}
        answer = post_tool_use(ev, hc)
        if answer is not None:
            ctx = answer["hookSpecificOutput"]["additionalContext"]
            assert ctx.startswith("memd: ") and len(ctx) <= 10_000
            notes += 1
        ev["hook_event_name"] = "PreToolUse"
        assert pre_tool_use(ev, hc) is None
    # the one index with over-long lines gets its note; the well-kept topic files get none
    assert 1 <= notes < len(files) // 4


@pytest.mark.parametrize(("config", "pre_loads", "prompt_loads"), [
    (None, False, False),
    ('[paths]\nclaude_dir = ""\nstate_dir = ""\n\n[hooks]\nrecall = false\nrecall_max_files = 5\n', False, False),
    ("# recall = true\n[hooks]\nrecall = false  # not yet\n", False, False),
    ("[hooks]\nrecall = true\n", False, True),
    ("hooks.recall = true\n", False, True),
    ('[paths]\nclaude_dir = "~/elsewhere"\n', False, False),  # a plain value is read without the loader
    ("paths.claude_dir = '/elsewhere'\n", True, False),  # any other form: only the loader can tell
    ("[paths\nbroken", False, False),  # not loaded, so not reported: the hook has nothing to say anyway
])
def test_plain_configs_are_not_loaded_for_other_files(hook_project: HookProject, config: str | None,
                                                      pre_loads: bool, prompt_loads: bool) -> None:
    """The example config spells every key out; a copy of it must not cost every tool call a config load."""
    if config is not None:
        hook_project.set_config(config)
    pre = run_hook(hook_project.write_event("PreToolUse", hook_project.work / "a.py", "x"),
                   python_flags=("-X", "importtime"))
    prompt = run_hook(hook_project.event("UserPromptSubmit", prompt="hi"), python_flags=("-X", "importtime"))
    assert (pre.rc, pre.out, prompt.rc, prompt.out) == (0, "", 0, "")
    assert ("memd.config" in imported(pre.err)) is pre_loads
    assert ("memd.config" in imported(prompt.err)) is prompt_loads


# The hook finds the Claude folder and autoMemoryDirectory with os.path (pathlib is not imported on
# its path); these hold it to what memd.layout answers for the rest of memd.


@pytest.mark.parametrize("settings", [
    {"autoMemoryDirectory": "/abs/mem"}, {"autoMemoryDirectory": "/abs//mem/./"}, {"autoMemoryDirectory": "~/mem"},
    {"autoMemoryDirectory": "relative/mem"}, {"autoMemoryDirectory": "  /padded/mem  "},
    {"autoMemoryDirectory": ""}, {"autoMemoryDirectory": 3}, {"other": 1}, ["not", "a", "dict"], "{broken", None,
])
def test_memory_override_agrees_with_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: object) -> None:
    from memd import layout
    from memd.ccsettings import user_memory_override as memory_override

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    claude = tmp_path / "claude"
    claude.mkdir()
    if isinstance(settings, str):
        (claude / "settings.json").write_text(settings)
    elif settings is not None:
        (claude / "settings.json").write_text(json.dumps(settings))
    expected = layout.memory_override(claude)
    assert memory_override(str(claude)) == (None if expected is None else os.fspath(expected))


@pytest.mark.parametrize(("arg", "configured", "env"), [
    ("~/c/", "", None), ("/x//y/./", "", "/ignored"), ("//net/c", "", None), (None, "~/conf/", "/ignored"),
    (None, "/a/../b", None), (None, "", "/env//dir/"), (None, "", None),
])
def test_claude_dir_agrees_with_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, arg: str | None,
                                       configured: str, env: str | None) -> None:
    from memd import layout
    from memd.config import Config, PathsConfig
    from memd.hooks.context import HookContext

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    if env is None:
        monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    else:
        monkeypatch.setenv("CLAUDE_CONFIG_DIR", env)
    hc = HookContext(claude_dir=arg)
    hc._config = Config(paths=PathsConfig(claude_dir=configured))
    assert hc.claude_dir() == os.fspath(layout.claude_dir(arg, configured))
