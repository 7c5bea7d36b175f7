"""Rendering for a model: golden cases (tests/golden/render/<case>.jsonl -> <case>.txt).

A case may carry budgets in <case>.budgets.json. Regenerate after a deliberate change with
``MEMD_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_transcripts_render.py`` and read the diff.
"""

from __future__ import annotations

import json
import os
import re
from datetime import timedelta, timezone
from pathlib import Path

import pytest

from memd.config import Config
from memd.transcripts import records as rec
from memd.transcripts.reader import read_all
from memd.transcripts.render import Budgets, render, tool_call
from memd.transcripts.scan import read_span

GOLDEN = Path(__file__).parent / "golden" / "render"
CASES = sorted(p.stem for p in GOLDEN.glob("*.jsonl"))


def _budgets(case: str) -> Budgets:
    f = GOLDEN / f"{case}.budgets.json"
    return Budgets(**json.loads(f.read_text())) if f.exists() else Budgets()


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str) -> None:
    span = read_span(GOLDEN / f"{case}.jsonl", 0, Config())
    got = render(span.records, _budgets(case))
    expected_path = GOLDEN / f"{case}.txt"
    if os.environ.get("MEMD_UPDATE_GOLDEN"):
        expected_path.write_text(got, encoding="utf-8")
    assert got == expected_path.read_text(encoding="utf-8")


def test_cases_exist() -> None:
    assert {"basic", "images_base64", "compaction", "meta_sidechain_tools", "malformed", "budget"} <= set(CASES)


def test_render_is_pure_and_timezone_is_explicit() -> None:
    items, _ = read_all(GOLDEN / "basic.jsonl")
    records = rec.parse(items)
    assert render(records) == render(records)
    plus2 = render(records, tz=timezone(timedelta(hours=2)))
    assert "[2026-03-05 Thu 11:58 +0200]" in plus2 and "[2026-03-05 Thu 09:58 UTC]" in render(records)


def test_tool_call_arguments_are_short() -> None:
    long = "x" * 1000
    assert tool_call(rec.ToolUse("t", "Bash", {"command": long})).startswith("Bash(command=xxx")
    assert len(tool_call(rec.ToolUse("t", "Bash", {"command": long}))) < 140
    custom = rec.ToolUse("t", "Custom", {"a": 1, "b": "two", "c": [3], "d": 4})
    assert tool_call(custom) == "Custom(a=1, b=two, +2 more)"
    assert tool_call(rec.ToolUse("t", "", {})) == "?()"


def test_real_sessions_render_within_budget_without_base64(claude_data: Path) -> None:
    cfg = Config()
    b = Budgets.from_config(cfg)
    for f in sorted((claude_data / "projects").rglob("*.jsonl")):
        span = read_span(f, 0, cfg)
        text = render(span.records, b)
        assert len(text) <= b.max_chars + 200, f
        assert not re.search(r"[A-Za-z0-9+/]{200,}", text), f
        if span.records:
            assert re.search(r"\[20\d\d-\d\d-\d\d \w{3} \d\d:\d\d UTC\]", text), f
