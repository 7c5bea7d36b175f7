"""Oracle: the MEMORY.md block Claude Code sends equals memd's loaded view, case by case.

Every case of ``battery.CASES`` is one MEMORY.md in one sandbox and one CLI run (a project has one
index); the runs happen once per module, a few at a time, and each test reads its case's block from
the first request the CLI sent.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from memd.core.budget import version_tuple
from memd.core.index import keeps_refdefs, loaded_view, measure, parse
from tests.realcc.battery import CASES
from tests.realcc.cli import Sandbox, memory_block
from tests.realcc.stub import CliStub

WARNING = "\n\n> WARNING: MEMORY.md is "


def _keep() -> bool:
    """Whether the tier's Claude Code keeps link reference definitions: memd follows the version."""
    from tests.realcc.cli import VERSION

    return keeps_refdefs(version_tuple(VERSION))
WORKERS = 3


def _run_case(binary: Path, stub: CliStub, cid: str) -> str | None:
    base = Path(tempfile.mkdtemp(prefix="rcc"))
    sb = Sandbox(binary, stub, base)
    (sb.memory / "MEMORY.md").write_bytes(CASES[cid].text.encode("utf-8"))
    prompt = f"oracle case {cid}"
    run = sb.run(prompt)
    assert run.rc == 0, (cid, run.stderr[-2000:])
    reqs = sb.main_requests(prompt)
    assert reqs, f"{cid}: the CLI sent no main request"
    return memory_block(reqs[0].body, sb.memory)


@pytest.fixture(scope="module")
def blocks(claude_cli: Path) -> Iterator[dict[str, str | None]]:
    with CliStub() as stub, ThreadPoolExecutor(WORKERS) as pool:
        futures = {cid: pool.submit(_run_case, claude_cli, stub, cid) for cid in CASES}
        yield {cid: f.result() for cid, f in futures.items()}


_INVISIBLE = re.compile("[\u200b\u2060\ufeff\u00ad\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _norm(line: str) -> str:
    """A line compared by what it says: invisible format characters and outer blanks aside."""
    return _INVISIBLE.sub("", line).strip()


def _split(block: str) -> tuple[str, str | None]:
    i = block.find(WARNING)
    return (block, None) if i < 0 else (block[:i], block[i + 2:])


def _params(kind: str, ids: list[str] | None = None) -> list[object]:
    out = []
    for cid in ids if ids is not None else list(CASES):
        reason = CASES[cid].xfail.get(kind)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        out.append(pytest.param(cid, id=cid, marks=marks))
    return out


def _cut_cases() -> list[str]:
    return [cid for cid, c in CASES.items() if loaded_view(c.text, refdefs=_keep()).truncated or "warning" in c.xfail]


@pytest.mark.parametrize("cid", _params("view"))
def test_loaded_view_text(blocks: dict[str, str | None], cid: str) -> None:
    """The loaded text (the warning line aside) is exactly memd's loaded view."""
    block = blocks[cid]
    mine = loaded_view(CASES[cid].text, refdefs=_keep()).text
    cc_text = "" if block is None else _split(block)[0]
    assert cc_text == _split(mine)[0]


@pytest.mark.parametrize("cid", _params("hidden"))
def test_hidden_entries(blocks: dict[str, str | None], cid: str) -> None:
    """The entries memd calls hidden are exactly those missing from Claude Code's block."""
    text = CASES[cid].text
    seen = [_norm(s) for s in _split(blocks[cid] or "")[0].split("\n")]
    seen_set = set(seen)
    long_lines = [s for s in seen if len(s) > 1000]  # a line cut inside (one line over the limit)

    def shown(line: str) -> bool:
        n = _norm(line)
        return n in seen_set or any(n.startswith(s) for s in long_lines)

    missing = [e.line for e in parse(text, refdefs=_keep()).entries if not shown(e.text)]
    assert [e.line for e in measure(text, refdefs=_keep()).hidden] == missing


@pytest.mark.parametrize("cid", _params("warning", _cut_cases()))
def test_truncation_warning(blocks: dict[str, str | None], cid: str) -> None:
    """The line appended when the index is cut reads as Claude Code's does."""
    cc_warning = _split(blocks[cid] or "")[1]
    mine = _split(loaded_view(CASES[cid].text, refdefs=_keep()).text)[1]
    assert cc_warning is not None
    assert mine == cc_warning


def test_whitespace_only_index_sends_no_block(blocks: dict[str, str | None]) -> None:
    assert blocks["whitespace-only"] is None
    assert loaded_view(CASES["whitespace-only"].text).text == ""


def test_warning_names_the_first_cut_line(blocks: dict[str, str | None]) -> None:
    """Pin Claude Code's own wording (so a new version that changes it shows up here)."""
    warning = _split(blocks["lines-201"] or "")[1]
    assert warning is not None
    assert re.fullmatch(
        r'> WARNING: MEMORY\.md is 201 lines \(limit: 200\)\. Only part of it was loaded: 1 of 201 lines were cut '
        r'off, starting at line 201 \("- \[Note 201\]\(note_201\.md\) — hook 201"\)\. Keep index entries to one '
        r'line under ~200 chars; move detail into topic files\.', warning), warning


def test_pinned_version(claude_cli: Path) -> None:
    from tests.realcc.cli import VERSION, version_of

    assert version_of(claude_cli) == VERSION


def test_block_is_the_first_user_message_s_first_reminder(sandbox: Sandbox) -> None:
    """Where the index goes: a <system-reminder> opening the first user message, with this exact header."""
    from tests.realcc.cli import MEMORY_HEADER, REMINDER_HEAD

    (sandbox.memory / "MEMORY.md").write_text("# Memory\n- [A](a.md) — alpha\n", encoding="utf-8")
    assert sandbox.run("hello there").rc == 0
    (first,) = sandbox.main_requests("hello there")
    msg = first.body["messages"][0]
    assert msg["role"] == "user"
    assert msg["content"][0]["text"] == (REMINDER_HEAD + MEMORY_HEADER.format(path=sandbox.memory / "MEMORY.md")
                                         + "# Memory\n- [A](a.md) — alpha\n</system-reminder>")
    assert "[A](a.md)" not in json.dumps(first.body["system"], ensure_ascii=False)  # not the system prompt


@pytest.mark.parametrize(("cid", "pattern"), [
    ("lines-201", r"> WARNING: MEMORY\.md is 201 lines \(limit: 200\)\. Only part of it was loaded: 1 of 201 lines "),
    ("size-only-129", r"> WARNING: MEMORY\.md is 25\.3KB \(limit: 24\.4KB\) — index entries are too long\. Only part "
                      r"of it was loaded: 5 of 129 lines were cut off, starting at line 125 \(\"- \[Note 125\]"),
    ("lines-and-size", r"> WARNING: MEMORY\.md is 210 lines and 28\.9KB\. Only part of it was loaded: 33 "),
    ("huge-line", r"> WARNING: MEMORY\.md is 29\.3KB \(limit: 24\.4KB\) — index entries are too long\. Only part "
                  r"of it was loaded: everything after the first 25000 characters of line 1 was cut off\. "),
])
def test_warning_shapes(blocks: dict[str, str | None], cid: str, pattern: str) -> None:
    """Pin the three shapes of Claude Code's warning: by lines, by size, by both; and one huge line."""
    warning = _split(blocks[cid] or "")[1]
    assert warning is not None and re.match(pattern, warning), warning
    assert warning.endswith(" Keep index entries to one line under ~200 chars; move detail into topic files.")


def test_memd_names_the_entries_a_leading_dashes_pair_hides(blocks: dict[str, str | None]) -> None:
    """Issue 23 #2: what Claude Code leaves out between two leading '---' lines is what MEM081 names."""
    from memd.core.files import FolderSnapshot
    from memd.core.lint import lint

    text = CASES["dashes-pair-hides-entries"].text
    block = blocks["dashes-pair-hides-entries"] or ""
    absent = [ln for ln in text.splitlines() if ln.startswith("- [") and ln not in block.split("\n")]
    assert absent == ["- [Note 1](note_1.md) — hook 1", "- [Note 2](note_2.md) — hook 2"], block
    (f,) = [f for f in lint(FolderSnapshot.from_texts({"MEMORY.md": text})) if f.code == "MEM081"]
    assert "'Note 1', 'Note 2'" in f.message

