"""The config read without tomllib (issue 35) agrees with tomllib and with the full path.

``memd.core.tomlflat.parse`` answers None or exactly what ``tomllib.loads`` answers; a config loaded
through it is the config (or the error) loaded through tomllib; `memd check NAME` with a config file is
answered as the full path answers it; the sync checks without ``re`` are the patterns they replaced.
"""

from __future__ import annotations

import os
import re
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from memd import config
from memd.core import tomlflat

# --------------------------------------------------------------------------- the parser agrees with tomllib

_KEYS = st.sampled_from(["a", "max_lines", "b-c", "x_1", "A", "9", "", "a b", "a.b", '"q"', "é", "a=b"])
_VALUES = st.one_of(
    st.integers(-10**20, 10**20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["true", "false", "True", "tru", '"x"', "'x'", '"a\\"b"', '"a\\nb"', "'a\"b'", '""', "''",
                     '"""x"""', "'''x'''", '"unclosed', "[1, 2]", "{a = 1}", "1979-05-27", "07:32:00", "0x1f",
                     "1_000", "+1", "-0", "01", "1.", ".5", "1e5", "1E+05", "-1.5e-3", "inf", "nan", "+0.0", "1.5.2",
                     "1e", "e5", '"tab\there"', '"a" "b"', "1 2", '"#"', "'#' # c", "", "=", "1#c", '"é"']),
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6))
_GAP = st.sampled_from(["", " ", "\t", "  "])
_COMMENT = st.sampled_from(["", " # note", "# x", "\t#", " #\x01", " # é", " # [x]"])


@st.composite
def _line(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["kv", "kv", "kv", "header", "blank", "comment", "junk"]))
    if kind == "kv":
        return draw(_GAP) + draw(_KEYS) + draw(_GAP) + "=" + draw(_GAP) + draw(_VALUES) + draw(_COMMENT)
    if kind == "header":
        name = draw(st.sampled_from(["budget", "hooks", "a", " budget ", "a.b", '"q"', "", "[x]", "x]"]))
        return draw(_GAP) + "[" + name + "]" + draw(st.sampled_from(["", " ", "x", "]"])) + draw(_COMMENT)
    if kind == "comment":
        return draw(_GAP) + "#" + draw(st.text(max_size=5))
    if kind == "junk":
        return draw(st.text(max_size=8))
    return draw(_GAP)


_TEXTS = st.tuples(st.lists(_line(), max_size=10), st.sampled_from(["\n", "\n", "\r\n"])).map(
    lambda t: t[1].join(t[0]))


def _tomllib(text: str) -> dict[str, Any] | None:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None


def _same(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to NaN and the types too (1 is not 1.0, True is not 1)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and a != a:
        return b != b
    return bool(a == b)


@st.composite
def _flat(draw: st.DrawFn) -> str:
    """Mostly a flat file (headers and keys each once), so values, blanks and comments are what varies."""
    lines: list[str] = []
    for s in range(draw(st.integers(1, 3))):
        lines.append(draw(_GAP) + f"[s{s}]" + draw(_COMMENT))
        for k in range(draw(st.integers(0, 4))):
            key = draw(_KEYS) if draw(st.integers(0, 9)) == 0 else f"k{k}"
            lines.append(draw(_GAP) + key + draw(_GAP) + "=" + draw(_GAP) + draw(_VALUES) + draw(_COMMENT))
        if draw(st.integers(0, 5)) == 0:
            lines.append(draw(_line()))
    return "\n".join(lines) + draw(st.sampled_from(["", "\n"]))


@settings(max_examples=3000, deadline=None)
@given(st.one_of(_TEXTS, _flat()))
def test_the_flat_parser_is_tomllib_or_declines(text: str) -> None:
    flat = tomlflat.parse(text)
    if flat is not None:
        expected = _tomllib(text)
        assert expected is not None, f"read what tomllib rejects: {text!r}"
        assert _same(flat, expected), (text, flat, expected)


def test_a_plain_config_is_read_and_anything_else_declined() -> None:
    text = ('# mine\n[budget]\nwarn_ratio = 0.75  # lower\nmax_index_line = 160\n\n [ hooks ]\nrecall = true\n'
            "[model]\ndream_model = 'claude-sonnet-5-5'\nbase_url = \"\"\n[sync]\nremote = \"git@h:me/m.git\"\n")
    assert tomlflat.parse(text) == tomllib.loads(text)
    assert tomlflat.parse("") == {} and tomlflat.parse("# only a comment\n\n") == {}
    example = (Path(config.__file__).parents[1] / "config.example.toml").read_text(encoding="utf-8")
    for declined in ("[a]\nx = [1]\n", "x = 1\n", "[a]\nx = 1\nx = 2\n", "[a]\n[a]\n", "[a.b]\n", "[a]\nb.c = 1\n",
                     '[a]\nx = "\\u00e9"\n', "[a]\nx = 1_000\n", "[a]\r\nx = 1\r\n", "[a]\nx = 01\n", example):
        assert tomlflat.parse(declined) is None, declined


# --------------------------------------------------------------------------- the config agrees

def _bad_value(info: config.KeyInfo) -> st.SearchStrategy[str]:
    good: st.SearchStrategy[str]
    if info.type is bool:
        good = st.sampled_from(["true", "false"])
    elif info.type is int:
        lo = int(info.min) if info.min is not None else -5
        good = st.integers(lo - 2, lo + 50).map(str)
    elif info.type is float:
        lo = info.min if info.min is not None else -1.0
        good = st.floats(lo - 1, (info.max if info.max is not None else lo + 100) + 1).map(repr)
    elif info.type is str and info.choices:
        good = st.sampled_from([*info.choices, "other"]).map(lambda s: f'"{s}"')
    elif info.type is str:
        good = st.sampled_from(["", "x", "01:00-02:00", "25:00-26:00", "0 */3 * * *", "* * *", "/tmp/m.git",
                                "git@h:me/m.git", "https://h/m.git", "h:/x", "a<b", "~/s"]).map(lambda s: f'"{s}"')
    else:
        good = st.just('"x"')
    return st.one_of(good, st.sampled_from(["1", "0.5", "true", '"s"', "-3"]))


_SCHEMA = config.schema()


@st.composite
def _config_text(draw: st.DrawFn) -> str:
    lines: list[str] = []
    for sect in draw(st.lists(st.sampled_from([*{i.path.split(".")[0] for i in _SCHEMA}, "budgett"]),
                              unique=True, max_size=4)):
        lines.append(f"[{sect}]")
        infos = [i for i in _SCHEMA if i.path.startswith(sect + ".")]
        keys = draw(st.lists(st.sampled_from([*infos, None]) if infos else st.none(), max_size=4, unique_by=id))
        for info in keys:
            if info is None:
                lines.append("warn_ration = 0.5")
            else:
                lines.append(f"{info.path.split('.', 1)[1]} = {draw(_bad_value(info))}")
    return "\n".join(lines) + "\n"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_config_text())
def test_a_config_read_flat_is_the_config_read_by_tomllib(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    assert tomlflat.parse(text) is not None, text  # these are all flat: the quick read is what is tested
    fast_cfg, fast_err = config.load_tolerant(path)
    slow_cfg, slow_err = config._build(tomllib.loads(text))
    assert fast_cfg == slow_cfg
    assert (fast_err.problems if fast_err else []) == slow_err


def test_the_defaults_pass_every_cross_check() -> None:
    """A section a file does not set is not cross-checked: its defaults must pass."""
    assert config._cross_checks(config.Config()) == []


_REMOTE = st.lists(st.sampled_from(["ssh", "git+ssh", "http", "https", "git", "file", "://", ":", "@", "/", "a",
                                    "h.x", " ", "\t", "\x1c", "\u00a0", "~", "-", "me", "é"]), max_size=8).map("".join)


@settings(max_examples=3000, deadline=None)
@given(_REMOTE)
def test_the_remote_check_is_the_patterns_it_replaced(remote: str) -> None:
    r = remote.strip()
    old = bool(re.match(r"^(ssh|git\+ssh|https?|git|file)://[^\s]+$", r)
               or re.match(r"^[^\s/:@]+@[^\s/:]+:[^\s]+$|^[^\s/:]+:[^\s/][^\s]*$", r) or r.startswith("/"))
    assert not r or config._git_url(r) == old, r
    machine = remote
    assert bool(config._sync_checks(config.SyncConfig(machine=machine))) == bool(
        re.search(r"[\x00-\x1f<>]", machine))


# --------------------------------------------------------------------------- `memd check NAME` agrees

@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_config_text())
def test_the_quick_check_with_a_config_file_is_the_full_check(
        make_project: Callable[..., Path], claude_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], text: str) -> None:
    """`memd --config FILE check NAME` (the quick path first) prints what `check --no-cache` prints, for
    good and bad config files alike; a good one that leaves the budget alone is answered by the quick path."""
    from memd import cli
    from memd.commands._checkquick import quick

    if not (claude_home / "projects" / "-home-u-app").exists():
        mem = make_project("-home-u-app", {"MEMORY.md": "- [A](a.md) — a\n"})
        past = time.time() - 60
        for p in [mem, *mem.rglob("*")]:
            os.utime(p, (past, past))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude_home))
    assume("[paths]" not in text)  # folders the test does not own are not written to
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    cfg, error = config.load_tolerant(path)
    cached = ["--config", str(path), "check", "-home-u-app"]
    rc = cli.main(cached)
    quick_out = capsys.readouterr()
    full_rc = cli.main(["--config", str(path), "check", "--no-cache", "-home-u-app"])
    full_out = capsys.readouterr()
    assert (rc, quick_out.out, quick_out.err) == (full_rc, full_out.out, full_out.err)
    if error is None and cfg.budget == config.Config().budget and cfg.hooks.team_pii:
        assert quick(cached) == rc  # answered from the cache, through the flat read
        capsys.readouterr()
