"""PostToolUse beside Claude Code's own budget note (issue 10 #5): decided from the session's version.

Claude Code 2.1.210 and later answer a MEMORY.md write near or over the limit with their own note (the
figures and "rewrite it"); memd then adds only what Claude Code does not say: which entries are hidden,
by title, and the long index lines. In-process, no CLI (the real-client case is
``tests/realcc/test_client.py::test_index_write_past_the_budget_gets_one_budget_note``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from memd import config as config_mod
from memd.ccsettings import transcript_version
from memd.config import Config
from memd.hooks.context import HookContext
from memd.hooks.tool_use import (
    CC_BUDGET_NOTES_SINCE,
    cc_gives_budget_notes,
    post_tool_use,
)
from tests.plugins.hooks import HookProject, index_text, run_hook, topic

# the words of a budget note; memd's addition beside Claude Code's note must use none of them
FIGURES = re.compile(r"\b(lines|budget|limit|characters|condense|rewrite it to|of 200)\b", re.I)


def record(version: str, kind: str = "assistant", **extra: Any) -> str:
    rec = {"type": kind, "uuid": "u", "sessionId": "s", "version": version, "timestamp": "2026-12-01T00:00:00Z",
           **extra}
    return json.dumps(rec, separators=(",", ":")) + "\n"


def transcript(tmp_path: Path, *lines: str, name: str = "t.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("".join(lines), encoding="utf-8")
    return p


# --------------------------------------------------------------------------- the version


def test_version_of_the_last_record(tmp_path: Path) -> None:
    p = transcript(tmp_path, record("2.1.100"), record("2.1.328", kind="user"))
    assert transcript_version(str(p)) == (2, 1, 328)  # resumed by a newer CLI: the tail wins


def test_version_inside_content_does_not_count(tmp_path: Path) -> None:
    inner = json.dumps({"version": "9.9.9"})
    p = transcript(tmp_path, record("2.1.150", message={"content": inner}))
    assert transcript_version(str(p)) == (2, 1, 150)


def test_version_when_a_huge_record_fills_the_tail(tmp_path: Path) -> None:
    huge = json.dumps({"type": "user", "message": {"content": "x" * 200_000}}) + "\n"
    p = transcript(tmp_path, record("2.1.328", kind="system"), huge)
    assert transcript_version(str(p)) == (2, 1, 328)  # found in the head


@pytest.mark.parametrize("path", [None, "", 3, "/no/such/file.jsonl", "/dev/null", "a\x00b"])
def test_no_version(tmp_path: Path, path: object) -> None:
    assert transcript_version(path) is None


def test_no_version_in_a_folder_or_an_empty_file(tmp_path: Path) -> None:
    assert transcript_version(str(tmp_path)) is None
    assert transcript_version(str(transcript(tmp_path))) is None
    assert transcript_version(str(transcript(tmp_path, "not json at all\n", name="junk.jsonl"))) is None


def test_a_fifo_does_not_block(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    assert transcript_version(str(fifo)) is None


def test_reads_at_most_two_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    reads: list[int] = []
    real = os.pread

    def counting(fd: int, n: int, offset: int) -> bytes:
        reads.append(n)
        return real(fd, n, offset)

    monkeypatch.setattr(os, "pread", counting)
    p = transcript(tmp_path, *(json.dumps({"type": "x", "pad": "y" * 1000}) + "\n" for _ in range(1000)))
    assert transcript_version(str(p)) is None
    assert len(reads) == 2 and sum(reads) <= 2 * 65_536


@pytest.mark.parametrize(("mode", "version", "expected"), [
    ("auto", "2.1.328", True),
    ("auto", "2.1.210", True),
    ("auto", "2.1.209", False),
    ("auto", "2.0.999", False),
    ("auto", "3.0.0", True),
    ("auto", None, False),  # unknown: memd's full note, never silence
    ("yes", "2.1.100", True),
    ("yes", None, True),
    ("no", "2.1.328", False),
])
def test_cc_gives_budget_notes(tmp_path: Path, mode: str, version: str | None, expected: bool) -> None:
    path = transcript(tmp_path, record(version)) if version else tmp_path / "missing.jsonl"
    cfg = config_mod.from_mapping({"hooks": {"cc_budget_notes": mode}})
    assert cc_gives_budget_notes({"transcript_path": str(path)}, cfg) is expected


def test_threshold_is_documented() -> None:
    assert CC_BUDGET_NOTES_SINCE == (2, 1, 210)
    doc = (Path(__file__).resolve().parent.parent / "docs" / "hooks.md").read_text(encoding="utf-8")
    assert "2.1.210" in doc and "cc_budget_notes" in doc


def test_config_key_rejects_other_values() -> None:
    from memd.errors import ConfigError

    with pytest.raises(ConfigError, match=r"hooks\.cc_budget_notes"):
        config_mod.from_mapping({"hooks": {"cc_budget_notes": "maybe"}})


# --------------------------------------------------------------------------- the note


def post(hp: HookProject, path: Path, version: str | None, tmp_path: Path, cfg: Config | None = None,
         ) -> str | None:
    hc = HookContext(claude_dir=str(hp.claude))
    hc._config = cfg or Config()
    ev = hp.write_event("PostToolUse", path, "x")
    ev["transcript_path"] = str(transcript(tmp_path, record(version)) if version else tmp_path / "none.jsonl")
    answer = post_tool_use(ev, hc)
    return None if answer is None else str(answer["hookSpecificOutput"]["additionalContext"])


@pytest.fixture
def hp(hook_project: HookProject, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> HookProject:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return hook_project


def test_near_the_budget_memd_is_silent_beside_claude_code(hp: HookProject, tmp_path: Path) -> None:
    (hp.memory / "MEMORY.md").write_text(index_text(170))
    assert post(hp, hp.memory / "MEMORY.md", "2.1.328", tmp_path) is None
    # an older Claude Code says nothing itself: memd's full note
    ctx = post(hp, hp.memory / "MEMORY.md", "2.1.145", tmp_path)
    assert ctx is not None and "near the budget" in ctx and "172 of 200 lines" in ctx


def test_over_the_budget_memd_names_only_the_hidden_entries(hp: HookProject, tmp_path: Path) -> None:
    (hp.memory / "MEMORY.md").write_text(index_text(230))
    ctx = post(hp, hp.memory / "MEMORY.md", "2.1.328", tmp_path)
    assert ctx is not None
    assert "These 32 index entries are past the cut of MEMORY.md" in ctx
    assert "Entry 198 (topic_198.md, line 201)" in ctx and "Entry 229 (topic_229.md, line 232)" in ctx
    assert "Entry 197 (" not in ctx
    assert not FIGURES.search(ctx), FIGURES.search(ctx)  # no figures, no advice: Claude Code gave them
    assert "OVER" not in ctx and "232" not in ctx.split("\n")[0]
    full = post(hp, hp.memory / "MEMORY.md", None, tmp_path)  # unknown version: today's full note
    assert full is not None and "OVER the budget" in full and "Entry 229 (topic_229.md, line 232)" in full


def test_one_hidden_entry_is_named_in_the_singular(hp: HookProject, tmp_path: Path) -> None:
    (hp.memory / "MEMORY.md").write_text(index_text(199))  # 201 lines with the heading and blank line
    ctx = post(hp, hp.memory / "MEMORY.md", "2.1.328", tmp_path)
    assert ctx is not None and ctx.startswith("memd: This index entry is past the cut")


def test_over_by_size_without_hidden_entries_is_silent(hp: HookProject, tmp_path: Path) -> None:
    (hp.memory / "MEMORY.md").write_text("# Memory\n\n" + "plain prose line, no entry here at all\n" * 300)
    assert post(hp, hp.memory / "MEMORY.md", "2.1.328", tmp_path) is None


def test_long_index_lines_are_still_memds_to_say(hp: HookProject, tmp_path: Path) -> None:
    text = index_text(170) + "- [Long](long.md) — " + "detail " * 30 + "\n"
    (hp.memory / "MEMORY.md").write_text(text)
    ctx = post(hp, hp.memory / "MEMORY.md", "2.1.328", tmp_path)
    assert ctx is not None and "1 line over 150 characters" in ctx and "near the budget" not in ctx


def test_a_topic_file_write_keeps_the_full_note(hp: HookProject, tmp_path: Path) -> None:
    """Claude Code's note follows a write of the index only: after a topic-file write memd says it all."""
    (hp.memory / "MEMORY.md").write_text(index_text(230))
    f = hp.memory / "feedback_new.md"
    f.write_text(topic())
    ctx = post(hp, f, "2.1.328", tmp_path)
    assert ctx is not None and "OVER the budget" in ctx and "232 of 200 lines" in ctx


def test_team_index_keeps_the_full_note(hp: HookProject, tmp_path: Path) -> None:
    (hp.memory / "team").mkdir()
    (hp.memory / "team" / "MEMORY.md").write_text(index_text(230))
    ctx = post(hp, hp.memory / "team" / "MEMORY.md", "2.1.328", tmp_path)
    assert ctx is not None and "OVER the budget" in ctx


def test_below_claude_codes_threshold_memds_own_ratio_still_speaks(hp: HookProject, tmp_path: Path) -> None:
    """near_ratio under 0.8: Claude Code is still silent at 150 lines, so memd's note is not a repeat."""
    (hp.memory / "MEMORY.md").write_text(index_text(148))
    cfg = config_mod.from_mapping({"hooks": {"near_ratio": 0.7}})
    ctx = post(hp, hp.memory / "MEMORY.md", "2.1.328", tmp_path, cfg)
    assert ctx is not None and "near the budget" in ctx


@pytest.mark.parametrize(("mode", "says_figures"), [("yes", False), ("no", True), ("auto", True)])
def test_config_key_forces_either_way(hp: HookProject, tmp_path: Path, mode: str, says_figures: bool) -> None:
    (hp.memory / "MEMORY.md").write_text(index_text(230))
    cfg = config_mod.from_mapping({"hooks": {"cc_budget_notes": mode}})
    ctx = post(hp, hp.memory / "MEMORY.md", None, tmp_path, cfg)  # no version known
    assert ctx is not None and ("OVER the budget" in ctx) is says_figures


def test_the_real_hook_process_reads_the_transcript(hook_project: HookProject, tmp_path: Path) -> None:
    (hook_project.memory / "MEMORY.md").write_text(index_text(170))
    ev = hook_project.write_event("PostToolUse", hook_project.memory / "MEMORY.md", "x")
    ev["transcript_path"] = str(transcript(tmp_path, record("2.1.328")))
    run = run_hook(ev)
    assert (run.rc, run.out) == (0, "")
    ev["transcript_path"] = str(transcript(tmp_path, record("2.1.200"), name="old.jsonl"))
    assert "near the budget" in run_hook(ev).context
