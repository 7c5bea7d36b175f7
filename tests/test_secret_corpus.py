"""The secrets corpus (tests/secret_corpus.py: 300 shapes, every evasion of issues 12 and 22) is caught
the same way everywhere a secret could reach memory or the API: the PreToolUse hook denies the write,
the memory tool refuses it, and redaction of what is sent leaves none of it (a tool result cut at 400
characters too); and nothing is flagged in real memory folders, the clean fixtures or the 69
look-alikes (docs example keys, placeholders, environment references, labelled hashes, memory about
handling secrets)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from memd.config import Config
from memd.core import secrets
from memd.hooks.context import HookContext
from memd.hooks.tool_use import pre_tool_use
from memd.llm.memtool import Limits, StagedMemory
from memd.transcripts.render import redact_sent
from tests.conftest import ROOT
from tests.secret_corpus import CORPUS, KEYS, LOOKALIKES, Case
from tests.test_secrets import BENIGN

EVASIONS = ("fullwidth", "zero-width space", "split by a space", "base64", "lower case", "bare",
            "password in prose", "without BEGIN")


VARIANTS = ("prose", "code fence", "table cell", "frontmatter", "JSON", "split", "escape")


def test_the_corpus_has_200_shapes_every_evasion_and_60_lookalikes() -> None:
    assert len(CORPUS) >= 200
    assert len({c.name for c in CORPUS}) == len(CORPUS)
    for evasion in EVASIONS + VARIANTS:
        assert any(evasion in c.name for c in CORPUS), evasion
    assert len(set(LOOKALIKES)) >= 60


def test_every_candidate_on_a_line_is_judged() -> None:
    """A password after another secret word on its line (issue 22: the first match took the rest of the line)."""
    pw = "hq" + "73KLzw" + "p41"
    for line in (f"token: see the vault; password is {pw}", f"the api key lives in 1Password and the secret is {pw}",
                 f"secret rotation monthly, token expiry weekly, root password {pw}"):
        assert pw not in secrets.redact(line), line


def test_the_hook_allows_the_lookalikes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    memory = tmp_path / "claude" / "projects" / "-home-dev-app" / "memory"
    hc = HookContext(claude_dir=str(tmp_path / "claude"))
    hc._config = Config()
    denied = []
    for i, text in enumerate(LOOKALIKES):
        ev = {"hook_event_name": "PreToolUse", "tool_name": "Write", "cwd": "/",
              "tool_input": {"file_path": str(memory / f"l{i}.md"), "content": f"---\nname: l\n---\n{text}\n"}}
        if pre_tool_use(ev, hc) is not None:
            denied.append(text)
        assert secrets.scan_all(text) == secrets.scan(text)
        assert redact_sent(text) == (text, {}) or text in denied, text
    assert len(denied) <= 1, denied  # the bar; none today


@pytest.mark.parametrize(("kind", "key"), KEYS, ids=[k for k, _ in KEYS])
def test_a_tool_result_cut_at_400_characters_keeps_no_first_part(kind: str, key: str) -> None:
    """What the renderer sends of a long tool result is its first 400 characters and "[…N more chars]":
    a key cut there is still redacted, from its first 16 characters on."""
    from memd.transcripts.render import _cut

    for kept in (16, 24, len(key) // 2, len(key) - 1):
        filler = ("a " * 400)[:399 - kept] + " "
        text = filler + key + " and the rest of the output" * 20
        shown = _cut(text, 400)
        assert shown.startswith(filler + key[:kept]) and "more chars]" in shown
        sent, counts = redact_sent(shown)
        assert key[:kept] not in sent and counts, (kept, sent[-80:])


@pytest.mark.parametrize("case", CORPUS, ids=[c.name for c in CORPUS])
def test_scan_and_redaction_catch_it(case: Case) -> None:
    hits = secrets.scan(case.text)
    assert hits, case.name
    assert any(case.kind in h.kind for h in hits), [h.kind for h in hits]
    assert secrets.scan_all(case.text) == hits  # the reference agrees with the fast path
    sent, counts = redact_sent(case.text)
    assert case.secret not in sent and sum(counts.values()) >= 1
    assert "[REDACTED:" in sent
    assert case.secret not in secrets.redact(case.text)  # what logs and messages get


def test_the_hook_denies_every_case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    memory = tmp_path / "claude" / "projects" / "-home-dev-app" / "memory"
    hc = HookContext(claude_dir=str(tmp_path / "claude"))
    hc._config = Config()
    for i, case in enumerate(CORPUS):
        for tool_input in ({"file_path": str(memory / f"m{i}.md"), "content": f"---\nname: m\n---\n{case.text}\n"},
                           {"file_path": str(memory / f"m{i}.md"), "old_string": "x", "new_string": case.text}):
            ev = {"hook_event_name": "PreToolUse", "tool_name": "Write" if "content" in tool_input else "Edit",
                  "tool_input": tool_input, "cwd": "/"}
            answer = pre_tool_use(ev, hc)
            assert answer is not None, case.name
            hso = answer["hookSpecificOutput"]
            assert hso["permissionDecision"] == "deny", case.name
            assert case.secret not in hso["permissionDecisionReason"]


@pytest.fixture
def mem(tmp_path: Path) -> StagedMemory:
    root = tmp_path / "stage" / "memories"
    root.mkdir(parents=True)
    (root / "MEMORY.md").write_text("- [A](a.md) — a\n")
    (root / "a.md").write_text("---\nname: A\ndescription: a\ntype: user\n---\nline one\n")
    return StagedMemory(root, Limits(max_file_bytes=100_000, max_run_bytes=10_000_000))


def test_the_memory_tool_refuses_every_case_and_never_shows_one(mem: StagedMemory) -> None:
    for i, case in enumerate(CORPUS):
        text, err = mem.handle({"command": "create", "path": f"/memories/k{i}.md", "file_text": case.text + "\n"})
        assert err and "refused" in text, case.name
        assert case.secret not in text
        assert not (mem.root / f"k{i}.md").exists()
        text, err = mem.handle({"command": "str_replace", "path": "/memories/a.md", "old_str": "line one",
                                "new_str": case.text})
        assert err and "line one" in (mem.root / "a.md").read_text(), case.name
        # a secret already in memory (written by hand) is redacted when the model views the file
        (mem.root / f"hand{i}.md").write_text(f"note\n{case.text}\nend\n")
        shown, err = mem.handle({"command": "view", "path": f"/memories/hand{i}.md"})
        assert not err and case.secret not in shown and "[REDACTED:" in shown, case.name
    assert mem.redactions >= len(CORPUS)


def _clean_fixtures() -> list[Path]:
    out = []
    for p in sorted((ROOT / "tests" / "golden").rglob("*.md")):
        if any("secret" in part for part in p.relative_to(ROOT).parts):
            continue  # the guard's goldens that hold a secret on purpose
        out.append(p)
    return out


def test_no_false_alarm_on_the_clean_fixtures(mem: StagedMemory) -> None:
    files = _clean_fixtures()
    assert len(files) >= 50
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in files] + BENIGN
    for i, text in enumerate(texts):
        assert secrets.scan(text) == [], (files[i] if i < len(files) else text)
        assert redact_sent(text) == (text, {})
    for i, text in enumerate(BENIGN):
        _, err = mem.handle({"command": "create", "path": f"/memories/b{i}.md", "file_text": text + "\n"})
        assert not err, text


def test_no_false_alarm_on_real_memory_folders(claude_data: Path, mem: StagedMemory) -> None:
    files = sorted(claude_data.glob("projects/*/memory/**/*.md"))
    assert len(files) >= 20
    for i, f in enumerate(files):
        text = f.read_text(encoding="utf-8", errors="replace")
        assert secrets.scan(text) == [], f
        assert redact_sent(text) == (text, {}), f
        _, err = mem.handle({"command": "create", "path": f"/memories/real{i}.md", "file_text": text})
        assert not err, f


def test_no_real_looking_key_in_the_repository() -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "grep", "-nIE", "(sk-ant-[A-Za-z0-9_-]{20,})"], cwd=ROOT, capture_output=True,
                         text=True, check=False)
    assert out.stdout == "", out.stdout
