"""Every regex that runs on memory or transcript text is linear-time on adversarial input.

``TABLE`` lists every ``re`` call in memd/core, memd/transcripts, memd/memfolder, memd/hooks,
memd/llm/memtool.py, memd/recall.py and memd/sync/merge.py (found in the source by ``tests/regex_audit.py``: a new
pattern not listed here fails ``test_the_table_lists_every_pattern``), with why it is linear. Each is
fed 1 MB inputs built to make it backtrack and must finish within ``RATIO`` times a plain regex scan
of the same bytes, measured just before. Linear patterns stay under a few hundred (a bounded
quantifier pays its bound at each start); a quadratic one needs millions and is stopped at the
deadline: ``test_the_check_stops_a_quadratic_pattern`` shows it on the patterns this file replaced
(``_CODE_SPAN`` took ~50 s on a 1.5 KB index line). The long tier, every shape of
``regex_audit.pathological`` on every pattern: ``python bench/fuzz.py --regex``.
"""

from __future__ import annotations

import re
import time

import pytest

from tests import regex_audit as ra

# key (module:owner) -> why the pattern is linear
TABLE: dict[str, str] = {
    "memd/core/declared:_WORD": "one character class run",
    "memd/core/declared:_SENTENCE_END": "one blank run between fixed one-character lookarounds",
    "memd/core/declared:_MARKS": "anchored; bounded list and heading markers, each ending in a blank run",
    "memd/core/evidence:_WORD": "a word run, then at most one apostrophe and one word run",
    "memd/core/evidence:_FENCE": "anchored, at most three blanks, one run",
    "memd/core/evidence:_TOKEN": "a word run with at most one apostrophe, or a newline",
    "memd/core/evidence:_LIMIT": "fixed limit words, at most 40 characters lazily, then a date of bounded digit "
                                 "counts or month words",
    "memd/core/evidence:_YEAR": "four digits",
    "memd/core/evidence:_RANGE_START": "a date of bounded digit counts or month words, then one run to the end",
    "memd/core/evidence:_iso": "one character class",
    "memd/core/evidence:_iso#2": "one character class",
    "memd/core/evidence:_iso#3": "one character class",
    "memd/transcripts/sessions:MemoryPaths.named_in": "one character class run",
    "memd/transcripts/usage:_SHELL_READ": "one separator, fixed command words, one blank",
    "memd/core/dates:_relative": "alternation of words, \\s+ between fixed words; matched on lower-cased lines",
    "memd/core/dates:_absolute": "bounded digit counts; month words then bounded digits",
    "memd/core/dates:_FENCE": "anchored, one run",
    "memd/core/fastscan:pattern_needles.m": "anchored flag prefix of a rule's source",
    "memd/core/fastscan:_QUANT_RX": "one token at a given position of a rule's source",
    "memd/core/fastscan:_SPECIAL_RUN": "possessive run from a capital or digit to its run's end, then an optional "
                                       "lookahead of one possessive run: each match consumes its run",
    "memd/core/fastscan:_PREFIX_SPLIT": "fixed prefixes then one blank",
    "memd/core/fastscan:_PIECE_SIGN": "a digit, or two characters",
    "memd/core/fastscan:_DIGIT": "one character class",
    "memd/core/fastscan:_B64ISH": "one character class run (on words of 16+ characters)",
    "memd/core/fastscan:_UPPER_OR_DIGIT": "one character class",
    "memd/core/fastscan:_LOWER": "one character class",
    "memd/core/fastscan:solid_length.m": "anchored flag prefix of a rule's source",
    "memd/core/fastscan:_inline_flags.m": "anchored flag prefix of a rule's source",
    "memd/core/forgetting:_LINE": "anchored at a line start, a fixed prefix, then blanks and .* to the end",
    "memd/core/forgetting:_MAP": "anchored at a line start, a fixed prefix, two runs of exactly 40 hex digits",
    "memd/core/forgetting:_HEX": "anchored, one character class (on a record's short fields)",
    "memd/core/frontmatter:_OPEN": "anchored at \\A",
    "memd/core/frontmatter:_CLOSE": "a fixed line, per line start",
    "memd/core/frontmatter:_fast_patterns._FAST": "possessive: value = (spaces, one non-space)* (was a lazy .*? "
                                                  "before [ ]*$, quadratic on inner spaces)",
    "memd/core/frontmatter:_fast_patterns._FAST#2": "as _FAST, indented",
    "memd/core/frontmatter:_LINE_KEY": "anchored key, then .* to the end",
    "memd/core/frontmatter:to_timestamp": "fullmatch of bounded date fields",
    "memd/core/guard:_MARKS": "anchored, bounded marks",
    "memd/core/guard:_words_in": "an escaped literal between word-boundary lookarounds",
    "memd/core/guard:without_words": "as _words_in (a description, escaped, between word-boundary lookarounds)",
    # (index's patterns are strings compiled on first use, so each is listed where it runs)
    "memd/core/index:__getattr__.rx": "ENTRY: match per line; the title's items are disjoint (a char or an escape "
                                      "pair)",
    "memd/core/index:parse.entry_rx": "ENTRY, as above",
    "memd/core/index:parse.hook": "_HOOK_SEP: anchored",
    "memd/core/index:Entry.is_local": "anchored scheme",
    "memd/core/index:source.m": "match at 0: the lazy body stops at the first ---",
    "memd/core/index:js_string": "one character class (astral)",
    "memd/core/index:_strip_comments.item": "anchored, bounded",
    "memd/core/index:_strip_comments": "anchored; (x[ \\t]*){3,}$ runs are disjoint per character",
    "memd/core/index:_fence_closes.m": "_FENCE: anchored, one run",
    "memd/core/index:_fenced_lines.m": "_FENCE: anchored, one run",
    "memd/core/index:_strip_comments.opens": "_FENCE: anchored, one run",
    "memd/core/index:_strip_comments#2": "_REFDEF: anchored; a bounded label, one destination run, an optional "
                                         "quoted title, each part's characters disjoint from what follows it",
    "memd/core/index:_strip_comments#3": "_HTML_BLOCK: anchored tag name",
    "memd/core/index:_strip_comments.para": "_BLOCK_START, as _strip_comments",
    "memd/core/index:frontmatter_end.m": "as source.m (the same regex)",
    "memd/core/budget:version_tuple.m": "anchored digits and dots",
    "memd/core/index:_shorten.m": "one whitespace character then non-space to the end, on a cut line",
    "memd/core/index:_clean": "_ASCII_INVISIBLE: one character class",
    "memd/core/index:_clean.text": "line ends",
    "memd/core/links:LINK": "a link's text stops at a '[' where another link could start; targets hold no "
                            "']' (a line of '[' was quadratic)",
    "memd/core/links:_SCHEME": "anchored scheme",
    "memd/core/links:_TICKS": "backtick runs and newlines for code_spans, the hand scanner that replaced "
                              "_CODE_SPAN (catastrophic backtracking)",
    "memd/core/lint:_frontmatter_checks.m": "a fixed phrase in a YAML error message",
    "memd/core/rebuild:_HEADING": "possessive: (spaces/# then one other character)*+ (was a lazy (.*?) before "
                                  "[ \\t#]*$, quadratic on a long inner run of spaces)",
    "memd/core/rebuild:shorten.sep_m": "anchored",
    "memd/core/rebuild:entry_line": "one character class",
    "memd/core/rebuild:entry_line#2": "one character class",
    "memd/core/rebuild:plain_line.title": "a backslash then one character",
    "memd/core/rebuild:_DASHES": "anchored",
    "memd/core/rebuild:_CONTROL": "one character class",
    "memd/core/rebuild:_NOT_BLOB": "one character class",
    "memd/core/rebuild:_SPACE": "one character class",
    "memd/core/secret_rules:EMAIL_OK": "a domain suffix of one match",
    "memd/core/secret_rules:compiled.rx": "every secret rule: fixed prefixes, bounded or possessive runs, "
                                          "lookaheads bounded (OpenAI, JWT, SAS, netrc, .env names, credential "
                                          "values and e-mail were quadratic)",
    # (secret_views' patterns are strings compiled on first use, so each is listed where it runs)
    "memd/core/secret_views:normalise": "_NON_ASCII: one character class run",
    "memd/core/secret_views:_context": "_CONTEXT: fixed words, then at most four bounded words and a bounded value",
    "memd/core/secret_views:_context#2": "_WORD: one run, within a bounded stretch",
    "memd/core/secret_views:_aws_secret": "_AWS_SECRET: exactly 40 from a run's start (lookbehind)",
    "memd/core/secret_views:_base64": "_B64_RUN: from a run's start (lookbehind), bounded",
    "memd/core/secret_views:_base64#2": "_UPPER_OR_DIGIT: one character class",
    "memd/core/secret_views:_base64#3": "_LOWER: one character class",
    "memd/core/secret_views:_key_bodies": "_B64_LINE: per line start, one run",
    "memd/core/secret_views:_split_tokens": "_PIECE: from a run's start (lookbehind): a lazy look within the run, "
                                            "then the whole run possessively",
    "memd/core/secret_views:_joined": "_DIGIT: one character class",
    "memd/core/secret_views:unescape": "_ESCAPE: two fixed escapes",
    "memd/core/secret_views:_prefix_split": "_PREFIX_SPLIT: fixed prefixes, then bounded blanks (one line break)",
    "memd/core/secret_views:_prefix_split.body_rx": "_KEY_BODY: one bounded run, matched once at a position",
    "memd/core/secret_views:_spaced": "_SPACED: from a blank (lookbehind), bounded pairs of one character and a blank",
    "memd/core/secret_views:may_be_disguised": "_SPACED: from a blank (lookbehind), bounded pairs",
    "memd/core/secret_views:_line_split": "_LINE_PAIR: a run from its start (lookbehind), possessive and bounded, "
                                          "blanks, one line break, then a bounded run looked at",
    "memd/core/secret_views:may_be_disguised#2": "_LINE_PAIR: as in _line_split",
    "memd/core/secret_views:_line_split#2": "_TOKENISH: a digit or a bounded case step",
    "memd/core/secret_views:may_be_disguised#3": "_TOKENISH: a digit or a bounded case step",
    "memd/hooks/context:HookContext.claude_dir_fast.m": "_CLAUDE_DIR: fullmatch of one config line",
    "memd/hooks/context:HookContext.recall_may_be_on": "_RECALL_FALSE: fullmatch of one config line",
    "memd/hooks/context:HookContext.recall_may_be_on.lines": "_RECALL_OTHER: fullmatch of one config line",
    "memd/ccsettings:project_dir_name": "_DIR_NAME: anchored, one bounded character class",
    "memd/ccsettings:project_dir_name#2": "_RESERVED: anchored alternatives of fixed words",
    "memd/ccsettings:sanitize.name": "_NON_ALNUM: one character class",
    "memd/ccsettings:transcript_version.found": "_VERSION: fixed key, bounded digits",
    "memd/ccsettings:transcript_version.found#2": "_VERSION: fixed key, bounded digits",
    "memd/hooks/tool_use:raw_fields": "_RAW_KEY: one of four keys after [{,] and blanks, a bounded string",
    "memd/recall:_SAFE_ID": "anchored, bounded",
    "memd/transcripts/render:_BASE64": "a run from its start (lookbehind), then padding",
    "memd/sync/merge:_MODIFIED": "match: possessive indent, a fixed key, then .* to the line's end (the value is "
                                 "stripped in Python; was a lazy .*? before \\s*$, quadratic on inner spaces)",
    "memd/transcripts/render:_ELIDED": "a literal marker, then one run of digits and commas",
}

KNOWN_QUADRATIC: set[str] = set()  # none left; a pattern listed here is reported as xfail


def test_the_table_lists_every_pattern() -> None:
    found = {s.key for s in ra.discover()}
    assert found - TABLE.keys() == set(), "a new pattern: add it to TABLE (and make sure it is linear)"
    assert TABLE.keys() - found == set(), "a pattern is gone: remove it from TABLE"


def _cases() -> list[tuple[str, str | bytes, int, str]]:
    out = []
    for site in ra.discover():
        for pattern, flags in ra.patterns(site):
            out.append((site.key, pattern, flags, site.mode))
    return out


CASES = _cases()


@pytest.mark.parametrize(("key", "pattern", "flags", "mode"), CASES,
                         ids=[f"{k}-{i}" for i, (k, *_) in enumerate(CASES)])
def test_linear_on_a_megabyte(key: str, pattern: str | bytes, flags: int, mode: str) -> None:
    if key in KNOWN_QUADRATIC:
        pytest.xfail(TABLE[key])
    rx = re.compile(pattern, flags)  # type: ignore[call-overload]
    for label, text in ra.quick(pattern):
        base, took = ra.check(rx, text, mode)
        assert took is not None, f"{key} {pattern!r} on {label}: past {ra.RATIO}x a plain scan ({base:.4f} s)"


# The patterns this branch replaced, as they were on main: the same check stops each of them
OLD = {
    "links._CODE_SPAN": (r"(`+)(?:(?!\1).)+?\1", "`"),
    "links.LINK": (r"(?<!!)\[(?:[^\]\\]|\\.)*\]\((<[^>]*>|[^)\s]*)(?:\s+\"[^\"]*\")?\)", "["),
    "index._COMMENT": (r"<!--[\s\S]*?-->", "<!--"),
    "recall {.*}": (r"(?s)\{.*\}", "{"),
    "netrc rule": (r"(?im)^\s*machine\s+\S+\s+login\s+\S+\s+password\s+\S{4,}", "\n"),
    "OpenAI rule": (r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}T3BlbkFJ[A-Za-z0-9_\-]{20,}", "sk-"),
}


@pytest.mark.parametrize("name", OLD)
def test_the_check_stops_a_quadratic_pattern(name: str) -> None:
    pattern, unit = OLD[name]
    text = unit * ((1 << 16) // len(unit))  # 64 KB: enough for a quadratic pattern to be stopped
    t0 = time.process_time()
    base, took = ra.check(re.compile(pattern), text)
    assert took is None, f"{name} finished in {took} s ({took / base:.0f}x a plain scan): the check is too lax"
    assert time.process_time() - t0 < 60


def _code_spans_shapes(n: int) -> list[str]:
    return ["`" * n, "`a" * (n // 2), "``a`" * (n // 4), "`\n" * (n // 2), "".join("`" * (i % 50 + 1) + "a"
                                                                                    for i in range(n // 26))]


@pytest.mark.parametrize("shape", range(5))
def test_code_spans_scan_is_linear(shape: int) -> None:
    from memd.core.links import mask_code

    text = _code_spans_shapes(ra.SIZE)[shape]
    base = ra.plain_scan(text)
    assert ra.timed(lambda: mask_code(text), base * ra.RATIO) is not None


def test_code_spans_match_the_pattern_they_replace() -> None:
    import itertools
    import random

    from memd.core.links import code_spans, mask_code

    old = re.compile(OLD["links._CODE_SPAN"][0])
    for n in range(9):
        for t in itertools.product("`a\n", repeat=n):
            s = "".join(t)
            assert code_spans(s) == [m.span() for m in old.finditer(s)], s
    rng = random.Random(12)
    for _ in range(20_000):
        s = "".join(rng.choice("````ab\n ") for _ in range(rng.randint(0, 40)))
        assert mask_code(s) == old.sub(lambda m: " " * len(m.group(0)), s), s


def test_links_and_comments_match_the_patterns_they_replace() -> None:
    import random

    from memd.core.index import strip_comments
    from memd.core.links import LINK

    old_link = re.compile(OLD["links.LINK"][0])
    old_comment = re.compile(OLD["index._COMMENT"][0])
    rng = random.Random(12)
    for _ in range(30_000):
        s = "".join(rng.choice("[]()\\!<> \"ab.") for _ in range(rng.randint(0, 14)))
        if "]" not in "".join(m.group(1) for m in old_link.finditer(s)) and "<" not in s:
            # the same targets, except a target holding "]" or a <target> holding "<" (no longer links)
            assert [m.group(1) for m in LINK.finditer(s)] == [m.group(1) for m in old_link.finditer(s)], s
        c = "".join(rng.choice(["<!--", "-->", "-", "<", "!", "a", "\n", ">"]) for _ in range(rng.randint(0, 12)))
        assert strip_comments(c) == old_comment.sub("", c), c


def test_frontmatter_fast_lines_match_the_patterns_they_replace() -> None:
    import random

    from memd.core import frontmatter

    old = (re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):(?:[ ]+(.*?))?[ ]*$"),
           re.compile(r"^([ ]+)([A-Za-z_][A-Za-z0-9_]*):(?:[ ]+(.*?))?[ ]*$"))
    rng = random.Random(12)
    for _ in range(30_000):
        s = "".join(rng.choice(["k", " ", ":", "a", "\n", "\t", "_", "1"]) for _ in range(rng.randint(0, 12)))
        for o, n in zip(old, frontmatter._fast_patterns(), strict=True):
            mo, mn = o.match(s), n.match(s)
            assert (mo and mo.groups()) == (mn and mn.groups()), s


def test_recall_reads_the_same_object_as_before() -> None:
    from memd.recall import parse_selection

    assert parse_selection('Sure: {"files": ["a.md"]} done') == ["a.md"]
    assert parse_selection("{" * 100_000) == []
    t0 = time.process_time()
    parse_selection("{" * 1_000_000)
    assert time.process_time() - t0 < 5


_MODIFIED_OLD = r"^(\s*)modified:\s*(.*?)\s*$"  # sync/merge.py before issue 21: 40 KB line -> 7 s


def _modified_line(n: int) -> str:
    """Claude Code's date line with a long run of inner spaces: a lazy value before ``\\s*$`` retries the run."""
    return "  modified: 2026-11-01" + " " * n + "x\n"


def test_the_sync_date_pattern_is_linear() -> None:
    from memd.sync import merge

    text = _modified_line(1 << 17)
    base, took = ra.check(merge._MODIFIED, text, "match")
    assert took is not None, f"_MODIFIED past {ra.RATIO}x a plain scan ({base:.4f} s)"
    _, old = ra.check(re.compile(_MODIFIED_OLD), _modified_line(1 << 16), "match")
    assert old is None, "the check is too lax: the old pattern finished"
    a, b = [_modified_line(40_000).encode()], [b"  modified: 2026-11-02\n"]
    t0 = time.process_time()
    assert merge._date_only(a, b) == b  # the later date still wins, at once
    assert time.process_time() - t0 < 1.0
