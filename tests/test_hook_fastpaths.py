"""The hook's fast paths agree with the slow ones they stand in for (issue 14: every hook event at most 2x a
bare interpreter start).

- ``memd.core.fastscan.FACTS``: each secret rule's facts (flags, solid length, needles) as parsing its
  source gives them;
- ``memd.hooks.defaults``: the config values the hooks read without a config file, as the schema has them;
- ``memd.core.jsonfast``: ``json.loads``/``json.dumps`` through ``_json`` alone;
- ``memd.core.index``: the invisible characters removed without compiling their class, an astral test
  without a regex, and ``measure`` without parsing when nothing is cut;
- ``memd.core.secret_views``: the split-token gate;
- the lean start itself: ``python -I -S .../memd/hooks/start.py`` finds memd from its own path, ignores the
  working folder and PYTHONPATH, and reaches site-packages only when a module is found nowhere else.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memd.config import Config
from memd.core import fastscan, index, jsonfast, secret_rules, secret_views
from memd.hooks import defaults
from tests.plugins.hooks import ROOT, HookProject, hook_project, index_text  # noqa: F401

START = ROOT / "memd" / "hooks" / "start.py"


def test_the_rule_facts_table_is_current() -> None:
    want = {fastscan.pattern_key(p): fastscan.rule_facts(p) for _, p in secret_rules.SPECS + secret_rules.PII_SPECS}
    assert want == fastscan.FACTS, "a rule changed: regenerate fastscan.FACTS from fastscan.rule_facts"
    for _, p in secret_rules.SPECS + secret_rules.PII_SPECS:
        rule = fastscan.Rule("x", p)  # from the table, as parsed
        assert (rule.flags, rule.solid) == (int(fastscan._inline_flags(p)), fastscan.solid_length(p, rule.flags))
        parsed = fastscan.sorted_needles(p, rule.flags)
        assert (None if parsed is None else [frozenset(a) for a in parsed]) == (
            None if rule.needles is None else [frozenset(a) for a in rule.needles])


def test_a_rule_missing_from_the_table_is_parsed() -> None:
    pattern = r"\bzz_test_[A-Za-z0-9]{30}\b"
    assert fastscan.pattern_key(pattern) not in fastscan.FACTS
    rule = fastscan.Rule("test", pattern)
    assert rule.solid == fastscan.solid_length(pattern) == 38 and rule.needles == fastscan.sorted_needles(pattern, 0)
    assert fastscan.pattern_key(r"[A-Z0-9]{16}") != fastscan.pattern_key(r"[A-Z0-9]{61}")  # positional


def test_hook_defaults_are_the_schemas() -> None:
    cfg = Config()
    for section, values in defaults.VALUES.items():
        for key, value in values.items():
            assert getattr(getattr(cfg, section), key) == value, f"{section}.{key}"
    d = defaults.Defaults()
    assert d.budget.max_lines == cfg.budget.max_lines  # type: ignore[attr-defined]
    assert d.hooks.recall_timeout_s == cfg.hooks.recall_timeout_s  # type: ignore[attr-defined]  # not copied: loaded
    assert d.sync.remote == cfg.sync.remote  # a section not copied


@pytest.mark.parametrize("text", [
    '{"a": [1, 2.5e3, -0, true, false, null, "\\u00e9\\ud83d\\ude00", {}], "b": {"c": "d"}}', " [] ", '"x"', "NaN",
    "-Infinity", "1e999", '{"a":1,"a":2}', "", "{", "[1,]", '"\x01"', '{"a":1} x', "tru", '{"a" 1}',
    "[" * 50 + "]" * 50,
])
def test_jsonfast_reads_as_json_does(text: str) -> None:
    try:
        want: object = json.loads(text)
    except ValueError:
        want = ValueError
    try:
        got: object = jsonfast.loads(text.encode())
    except ValueError:
        got = ValueError
    assert got == want or (isinstance(want, float) and math.isnan(want) and math.isnan(got))  # type: ignore[arg-type]


def test_jsonfast_reads_bytes_with_a_bom_and_utf16_as_json_does() -> None:
    for raw in (b'\xef\xbb\xbf{"a": 1}', '{"a": "é"}'.encode("utf-16"), '{"a": "é"}'.encode("utf-32-le")):
        assert jsonfast.loads(raw) == json.loads(raw)
    with pytest.raises(ValueError):
        jsonfast.loads(b'{"a": "\xff"}')


@pytest.mark.parametrize("value", [
    {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "reason": "é\n\u2028\x00"}},
    "x", 3, 2.5, [], [None, True, False], {1: 2}, {"nan": float("inf")},
])
def test_jsonfast_writes_as_json_does(value: object) -> None:
    assert jsonfast.dumps(value) == json.dumps(value, ensure_ascii=False)
    with pytest.raises(TypeError):
        jsonfast.dumps({"a": object()})
    assert jsonfast.dumps({"p": Path("/x")}, default=str) == json.dumps({"p": Path("/x")}, default=str)


def test_invisible_characters_go_as_the_regex_removes_them() -> None:
    every = "".join(chr(c) for c in range(0x110000))  # every code point once, lone surrogates included
    assert index.without_invisible(every) == re.sub(index._INVISIBLE, "", every)
    assert index.without_invisible("plain — text") == "plain — text"


@pytest.mark.parametrize("text", ["plain", "é and —", "emoji \U0001f600 here", "\U00010000", "\ud83d lone"])
def test_js_string_without_a_regex(text: str) -> None:
    want = re.sub(r"[\U00010000-\U0010ffff]", lambda m: index._pair(m), text)
    assert index.js_string(text) == want


INDEXES = [
    index_text(10), index_text(170), index_text(199), index_text(200), index_text(201), index_text(260),
    "---\nname: x\n---\n" + index_text(150), "<!-- a comment\nover lines -->\n" + index_text(190),
    index_text(5, hook="x" * 3000) * 3, "\n\n  \n" + index_text(120) + "\n\n\n", "```\n" + index_text(30) + "```\n",
    "- [a](a.md) — ok\r\n" * 210, index_text(100, hook="emoji \U0001f600 and — dashes"), "", "   \n",
]


@pytest.mark.parametrize("n", range(len(INDEXES)))
def test_measure_without_a_parse_agrees_with_the_parse(n: int) -> None:
    text = INDEXES[n]
    for limits in ((200, 25_000), (150, 25_000), (200, 8_000)):
        fast = index.measure(text, *limits)
        full = index.measure(text, *limits, idx=index.parse(text))
        assert fast == full


@pytest.mark.parametrize("text", [
    "plain lower-case prose, nothing here\n", "a note -- with ==== and .... runs ++++ //// ____\n",
    "sk-ant-api03 abcdefghijklmnopqrst uvwxyz\n", "ghp_ABCDEFGHIJ KLMNOPQRSTUVWXYZ0123456789ab\n",
    "AKIA 1234567890ABCDEF\n",
])
def test_the_split_token_gate_changes_no_finding(text: str) -> None:
    views = secret_views.find(text, lambda t: fastscan.rule_spans(t))
    if not secret_views._may_have_pieces(text):
        assert secret_views._split_tokens(text, lambda t: fastscan.rule_spans(t)) == []
    assert views == secret_views.find(text, lambda t: secret_rules.collect_spans(t, secret_rules.rules()))


def _lean(args: list[str], stdin: bytes, cwd: Path, env: dict[str, str] | None = None
          ) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-I", "-S", str(START), *args], input=stdin, capture_output=True,
                          cwd=cwd, env=env, timeout=60, check=False)


def test_the_lean_start_ignores_the_working_folder_and_pythonpath(hook_project: HookProject,  # noqa: F811
                                                                   tmp_path: Path) -> None:
    """-I: a module in the session's cwd or on PYTHONPATH cannot stand in for one the hook imports."""
    trap = tmp_path / "trap"
    (trap / "memd").mkdir(parents=True)
    (trap / "memd" / "__init__.py").write_text("raise SystemExit('shadowed')\n")
    (trap / "json.py").write_text("raise SystemExit('shadowed')\n")
    (trap / "re.py").write_text("raise SystemExit('shadowed')\n")
    event = hook_project.write_event("PreToolUse", hook_project.memory / "a.md", "AKIAIOSFODNN7EXAMPLQ\n")
    env = {**os.environ, "PYTHONPATH": str(trap), "PYTHONSTARTUP": str(trap / "re.py")}
    run = _lean([], json.dumps(event).encode(), trap, env)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_the_lean_start_reaches_site_packages_on_demand(tmp_path: Path) -> None:
    """A module found neither in the standard library nor beside memd (the SDK recall imports, in an editable
    install) makes the start run site once; the hook paths themselves never do."""
    code = ("import sys; sys.argv = ['x', '--help']\n"
            f"sys.path.append({str(ROOT)!r})\n"
            "from memd.hooks import entry\n"
            "sys.meta_path.append(entry._SiteOnDemand)\n"
            "assert 'site' not in sys.modules\n"
            "import pytest\n"  # only in the venv's site-packages
            "assert 'site' in sys.modules and entry._SiteOnDemand not in sys.meta_path\n"
            "print('ok')\n")
    run = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         timeout=60, check=False)
    assert run.stdout.strip() == "ok", run.stderr


def test_the_start_file_finds_memd_from_its_own_path(tmp_path: Path) -> None:
    """A copy of the package elsewhere (as site-packages holds it) runs its own memd, not the checkout's."""
    import shutil

    copy = tmp_path / "site-packages"
    shutil.copytree(ROOT / "memd", copy / "memd", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "memd" / "hooks" / "entry.py").write_text("def start():\n    print('the copy')\n    return 0\n")
    run = subprocess.run([sys.executable, "-I", "-S", str(copy / "memd" / "hooks" / "start.py")], input=b"{}",
                         capture_output=True, cwd=tmp_path, timeout=60, check=False)
    assert (run.returncode, run.stdout.strip()) == (0, b"the copy"), run.stderr


def test_the_lean_start_answers_and_exits_with_main_s_code(hook_project: HookProject) -> None:  # noqa: F811
    """It leaves through os._exit after flushing: the answer arrives whole, and the exit code is main's."""
    event = hook_project.write_event("PreToolUse", hook_project.memory / "a.md", "AKIAIOSFODNN7EXAMPLQ é\n")
    run = _lean([], json.dumps(event).encode(), hook_project.work)
    assert run.returncode == 0 and run.stdout.endswith(b"}\n")
    assert "AWS access key" in json.loads(run.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert _lean(["--bogus"], b"{}", hook_project.work).returncode == 0  # bad arguments fail open


def test_the_lean_start_with_a_closed_stdout_still_exits_0(hook_project: HookProject) -> None:  # noqa: F811
    ev = hook_project.write_event("PreToolUse", hook_project.memory / "x.md", "k AKIAIOSFODNN7EXAMPLQ")
    r, w = os.pipe()
    os.close(r)  # Claude Code gave up on the hook: writing the answer fails with EPIPE
    try:
        proc = subprocess.run([sys.executable, "-I", "-S", str(START)], input=json.dumps(ev).encode(), stdout=w,
                              stderr=subprocess.PIPE, timeout=60, check=False)
    finally:
        os.close(w)
    assert proc.returncode == 0 and proc.stderr == b""
