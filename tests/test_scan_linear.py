"""Every scanner is linear in its input (issue 22): a text dense with secrets costs what its size says.

- ``secret_rules.hits_of`` counted lines from the text's start for every hit: 1 MB of AWS key ids took
  ``memd check`` 47 s, ``memd status`` 61 s and the PreToolUse hook 21 s. It agrees with that count
  (hypothesis) and is now one pass.
- Dense texts of every shape (the secret corpus, the look-alikes, parser pieces), repeated: a scan and
  a redaction finish within a floor plus a number of plain regex scans of the same text (hypothesis).
- The ratio, measured here on the same machine in the same run: time at 1 MB over time at 100 KB for
  check, status, the hook and redaction. A quadratic path gives ~100 (the key ids gave 70-200); a
  linear one 9-12, and up to ~15 on this shared machine under load (a plain regex pass alone does:
  100 KB fits the cache, 1 MB does not), so the test holds ``MAX_RATIO`` = 20, best of a few runs,
  measured again before failing. The issue's target of 12 is a benchmark: ``bench/bench_linear.py``,
  figures in docs/reliability.md.
- ``settings_merge.is_memd_command``: its "memd ... hook" pattern scanned the rest of the line from
  every "memd" (40 KB: 21 s); the pass that replaced it gives the old pattern's answers.
"""

from __future__ import annotations

import random
import re
import string
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memd import inspect, settings_merge
from memd.config import Config
from memd.core import secret_rules, secrets
from memd.hooks.context import HookContext
from memd.hooks.tool_use import pre_tool_use
from memd.layout import Project
from tests import regex_audit as ra
from tests.secret_corpus import CORPUS, LOOKALIKES

MAX_RATIO = 20  # time at 1 MB / time at 100 KB (10x the text): linear ~10, quadratic ~100
FLOOR = 1.0  # seconds any dense text may take (a loaded machine)
PLAIN_SCANS = 400  # and this many plain regex scans of it (a scan is ~20 regex passes and a few detectors)


# --------------------------------------------------------------------------- positions


def _naive(text: str, offset: int) -> tuple[int, int]:
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.text(alphabet="ab\n\r ", max_size=60), st.lists(st.integers(0, 60), max_size=12), st.booleans())
def test_hits_of_gives_the_positions_counted_from_the_start(text: str, offsets: list[int], ordered: bool) -> None:
    offsets = [min(o, len(text)) for o in offsets]
    if ordered:
        offsets.sort()
    hits = secret_rules.hits_of(text, [("k", o, o + 1) for o in offsets])
    assert [(h.line, h.column) for h in hits] == [_naive(text, o) for o in offsets]


# --------------------------------------------------------------------------- dense texts

_UNITS = [c.text for c in CORPUS] + list(LOOKALIKES) + [
    "AKIA", "ghp_", "password: ", "token ", "-----BEGIN ", "eyJ", "sk-", "://:", "@", "=", "xoxb-", "\u200b",
    "\uff53\uff4b", "Zm9v", "A1b2 ", "https://discord.com/api/webhooks/"]


@st.composite
def _dense(draw: st.DrawFn) -> str:
    units = draw(st.lists(st.sampled_from(_UNITS), min_size=1, max_size=3))
    sep = draw(st.sampled_from(["", " ", "\n", "\t", " | ", "\\n", ", "]))
    unit = sep.join(units) + sep
    return unit * max(1, draw(st.integers(8_000, 40_000)) // max(1, len(unit)))


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(_dense())
def test_a_dense_text_is_scanned_in_linear_time(text: str) -> None:
    # A loaded shared machine can stall one run for seconds while the baseline, a few milliseconds, missed
    # the stall: a quadratic path is 10-100x past the deadline every time, so the deadline is tried again
    # with a fresh baseline before the test fails (it failed once in a full run at a load average of 10).
    for _ in range(3):
        base = ra.plain_scan(text)
        took = ra.timed(lambda: (secrets.scan(text), secrets.redact(text)), FLOOR + PLAIN_SCANS * base)
        if took is not None:
            return
    pytest.fail(f"{len(text)} characters of {text[:60]!r}: past {FLOOR} s + {PLAIN_SCANS} plain scans, 3 times")


# --------------------------------------------------------------------------- the ratio, end to end

_rng = random.Random(22)


def _key_ids(size: int, sep: str) -> str:
    """About size characters of AWS key ids (the issue's case: every id is a hit)."""
    n = size // 21 + 1
    return sep.join("AKIA" + "".join(_rng.choice(string.ascii_uppercase + "234567") for _ in range(16))
                    for _ in range(n))[:size]


def _passwords(size: int, sep: str) -> str:
    """Credentials in every form a line holds them, each line a hit of several rules and detectors."""
    line = ("DB_PASSWORD=" + "Xk9mP2vL" + " token: " + "q7Rt5Wz1Yb" + " redis://:" + "pw9Xk2mQ" + "@cache:6379"
            + " the password is " + "Zp4$wQ8n" + sep)
    return (line * (size // len(line) + 1))[:size]


DENSE: dict[str, Callable[[int], str]] = {
    "key ids, one a line": lambda n: _key_ids(n, "\n"),
    "key ids, one line": lambda n: _key_ids(n, " "),
    "credentials, one a line": lambda n: _passwords(n, "\n"),
}


def _best(run: Callable[[], object], times: int = 3) -> float:
    best = float("inf")
    for _ in range(times):
        t0 = time.process_time()
        run()
        best = min(best, time.process_time() - t0)
    return best


def _ratio(make: Callable[[int], Callable[[], object]]) -> tuple[float, float, float]:
    small, big = make(100_000), make(1_000_000)
    t_small = _best(small, 5)
    t_big = _best(big, 3)
    return t_big / max(t_small, 1e-3), t_small, t_big


def _assert_linear(what: str, make: Callable[[int], Callable[[], object]]) -> None:
    got = _ratio(make)
    for _ in range(2):  # a loaded machine stalls a run: measure again before failing
        if got[0] <= MAX_RATIO:
            break
        got = min(got, _ratio(make))
    assert got[0] <= MAX_RATIO, f"{what}: 1 MB took {got[2]:.2f} s, 100 KB {got[1]:.3f} s ({got[0]:.1f}x)"


@pytest.fixture
def claude(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "claude"


def _project(claude: Path, text: str) -> Project:
    pdir = claude / "projects" / f"-p{len(text)}"
    mem = pdir / "memory"
    mem.mkdir(parents=True, exist_ok=True)
    (mem / "MEMORY.md").write_text("- [A](a.md) — a\n")
    (mem / "a.md").write_text("---\nname: a\ndescription: d\ntype: user\n---\n" + text)
    return Project(pdir.name, pdir, mem)


@pytest.mark.parametrize("shape", list(DENSE))
def test_check_status_hook_and_redaction_are_linear(shape: str, claude: Path) -> None:
    hc = HookContext(claude_dir=str(claude))
    hc._config = Config()
    texts = {n: DENSE[shape](n) for n in (100_000, 1_000_000)}
    projects = {n: _project(claude, t) for n, t in texts.items()}

    def check(n: int) -> Callable[[], object]:
        return lambda: inspect.check_projects([projects[n]], Config())

    def status(n: int) -> Callable[[], object]:
        return lambda: inspect.status_rows([projects[n]], Config())

    def hook(n: int) -> Callable[[], object]:
        ev = {"hook_event_name": "PreToolUse", "tool_name": "Write", "cwd": "/",
              "tool_input": {"file_path": str(projects[n].memory_dir / "b.md"), "content": texts[n]}}

        def run() -> None:
            answer = pre_tool_use(ev, hc)
            assert answer is not None and answer["hookSpecificOutput"]["permissionDecision"] == "deny"
        return run

    def redaction(n: int) -> Callable[[], object]:
        return lambda: secrets.redact(texts[n], marker="[REDACTED:{kind}]")

    assert secrets.scan(texts[100_000][:2000])  # every shape is dense with findings
    for what, make in (("check", check), ("status", status), ("hook", hook), ("redaction", redaction)):
        _assert_linear(f"{what} on {shape}", make)


# --------------------------------------------------------------------------- settings.json commands

_OLD_MEMD_COMMAND = re.compile(r"(?:^|[\s/\\\"'])memd(?:\.exe)?[\"']?\s+(?:.*\s)?hook(?:\s|$)|-m\s+memd\s+hook(?:\s|$)"
                               r"|(?:^|[\s/\\\"'])memd-hook(?:\.exe)?[\"']?(?:\s|$)"
                               r"|[/\\]memd[/\\]hooks[/\\]start\.py[\"']?(?:\s|$)")


@settings(max_examples=3000, deadline=None, derandomize=True, database=None)
@given(st.lists(st.sampled_from(["memd", "hook", " ", "\n", "\t", "x", ".exe", '"', "'", "/", "-m", " hook",
                                 "memd ", "\r", "\\", "-hook", "hooks", "start.py", "\x1c"]), max_size=12))
def test_is_memd_command_gives_the_old_patterns_answers(pieces: list[str]) -> None:
    command = "".join(pieces)
    assert settings_merge.is_memd_command(command) is bool(_OLD_MEMD_COMMAND.search(command)), command


@pytest.mark.parametrize("unit", ["memd ", "memd x", "memd\t\n", " memd.exe' ho"])
def test_is_memd_command_is_linear_on_a_long_command(unit: str) -> None:
    def make(n: int) -> Callable[[], object]:
        text = unit * (n // len(unit))
        return lambda: settings_merge.is_memd_command(text)

    _assert_linear(f"is_memd_command on {unit!r}", make)
    t0 = time.process_time()
    assert not settings_merge.is_memd_command("memd " * 8_000)  # the 40 KB command: 21 s before
    assert time.process_time() - t0 < 1
