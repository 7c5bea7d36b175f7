"""MEMORY.md: lines as Claude Code splits them, the loaded view and the hidden entries."""

from __future__ import annotations

from memd.core import index


def test_split_lines_only_on_newlines() -> None:
    assert index.split_lines("a\r\nb\u2028c\x0cd\n") == ["a", "b\u2028c\x0cd"]
    assert index.split_lines("") == [] and index.split_lines("\n") == [""]
    idx = index.parse("- [A](a.md) — x\u2028y\n- [B](b.md)\n")
    assert [e.line for e in idx.entries] == [1, 2]


def test_hidden_entries_past_the_line_cut() -> None:
    text = "\n".join(f"- [E{i}](e{i}.md) — h" for i in range(1, 206)) + "\n"
    b = index.measure(text)
    assert b.level == "over" and b.lines == 205
    assert [e.title for e in b.hidden] == ["E201", "E202", "E203", "E204", "E205"]


def test_hidden_entries_past_the_char_cut_counts_utf16() -> None:
    line = "- [E](e.md) — " + "😀" * 50  # 64 characters, 114 UTF-16 units
    text = "\n".join(line.replace("[E]", f"[E{i}]") for i in range(1, 240)) + "\n"
    b = index.measure(text, max_lines=1000)
    assert b.level == "over" and b.hidden and b.hidden[0].title == f"E{240 - len(b.hidden)}"
    assert index.utf16_len("😀") == 2


def test_near_level_and_comments_do_not_count() -> None:
    body = "\n".join(f"- [E{i}](e{i}.md)" for i in range(1, 161))
    assert index.measure(body).level == "near"
    commented = "<!--\n" + "\n".join(f"note {i}" for i in range(100)) + "\n-->\n" + "\n".join(
        f"- [E{i}](e{i}.md)" for i in range(1, 101))
    b = index.measure(commented)
    assert b.level == "ok" and b.lines == 100
    assert next(e.line for e in index.parse(commented).entries) == 103


# --------------------------------------------------------------------------- Claude Code 2.1.328's loading
# (facts.md section 2; each shape also has a golden case under tests/golden/view/)

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def test_crlf_counts_its_cr_unless_the_file_has_a_comment() -> None:
    lf = "- [A](a.md) — one\n- [B](b.md) — two\n"
    crlf = lf.replace("\n", "\r\n")
    assert index.loaded_view(crlf).chars == index.loaded_view(lf).chars + 1  # the inner "\r"; the last is trimmed
    assert index.loaded_view(crlf).text == index.loaded_view(lf).text  # the session gets "\n" only
    with_comment = "<!-- c -->\r\n" + crlf
    assert index.loaded_view(with_comment).chars == index.loaded_view(lf).chars


def test_leading_bom_does_not_count() -> None:
    assert index.loaded_view("\ufeff- [A](a.md)\n").chars == len("- [A](a.md)")


def test_single_huge_line_loads_its_first_units_and_is_not_hidden() -> None:
    text = "- [Huge](h.md) — " + "x" * 30_000 + "\n- [Next](n.md)\n"
    view, b = index.loaded_view(text), index.measure(text)
    assert view.text.startswith(text[:25_000]) and view.text[25_000:].startswith("\n\n> WARNING: MEMORY.md is ")
    assert "everything after the first 25000 characters of line 1 was cut off" in view.text
    assert [e.title for e in b.hidden] == ["Next"]


def test_surrogate_pair_split_at_the_cut_loses_its_half() -> None:
    text = "a" * 24_999 + "😀tail"
    body = index.loaded_view(text).text.split("\n\n> WARNING")[0]
    assert body == "a" * 24_999


def test_comment_is_stripped_only_at_top_level_and_only_itself() -> None:
    text = ("# M\n<!-- c --> tail\n```\n<!-- fenced -->\n```\n- [A](a.md)\n  <!-- under A -->\n"
            "<!-- gone -->\n    <!-- code -->\n")
    view = index.loaded_view(text).text
    assert " tail" in view and "<!-- fenced -->" in view and "<!-- under A -->" in view
    assert "<!-- code -->" in view and "gone" not in view and "<!-- c -->" not in view


def test_unclosed_comment_is_loaded_as_text() -> None:
    text = "# M\n<!-- open\n- [B](b.md) — loaded\n"
    idx = index.parse(text)
    assert [e.title for e in idx.entries] == ["B"] and idx.open_comment
    assert "- [B](b.md) — loaded" in index.loaded_view(text).text and not index.measure(text).hidden


def test_frontmatter_closes_at_the_first_dashes_anywhere() -> None:
    text = "---\ndescription: a --- b\n---\n- [A](a.md)\n"
    assert index.loaded_view(text).text == "b\n---\n- [A](a.md)"
    assert index.loaded_view("---\nname: x\n---\n- [A](a.md)\n").text == "- [A](a.md)"


def test_zero_width_characters_removed_after_counting() -> None:
    view = index.loaded_view("- [A](a.md) — o\u200bne\u2060\n")
    assert view.text == "- [A](a.md) — one" and view.chars == len("- [A](a.md) — one") + 2


def test_whitespace_only_or_comment_only_file_loads_nothing() -> None:
    for text in (" \n\t\n\u3000", "<!-- x -->\n"):
        view = index.loaded_view(text)
        assert view.text == "" and view.lines == 0 and not view.visible


_words = st.text(alphabet="abcdéz 😀中", min_size=0, max_size=40)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(st.sampled_from(["entry", "text", "blank", "comment"]), _words), max_size=60),
       st.integers(min_value=5, max_value=80), st.integers(min_value=50, max_value=2_000), st.booleans())
def test_hidden_entries_are_exactly_those_missing_from_the_view(
        shape: list[tuple[str, str]], max_lines: int, max_chars: int, crlf: bool) -> None:
    lines = []
    for i, (kind, words) in enumerate(shape):
        lines.append({"entry": f"- [T{i}](t{i}.md) — {words}", "text": words.strip() or "x",
                      "blank": "", "comment": f"<!-- {words} -->"}[kind])
    text = ("\r\n" if crlf else "\n").join(lines) + "\n"
    view = index.loaded_view(text, max_lines, max_chars)
    body = view.text.split("\n\n> WARNING: MEMORY.md is ")[0]
    hidden = {e.title for e in index.measure(text, max_lines, max_chars).hidden}
    for e in index.parse(text).entries:
        # loaded whole, or the first line cut in its middle (then partly loaded: not hidden)
        seen = f"[{e.title}]" in body or bool(body and "\n" not in body and e.text.startswith(body))
        assert (e.title in hidden) == (not seen)
    if "<!--" not in text:
        trimmed = text.strip(index.JS_SPACE)
        assert view.chars == index.utf16_len(trimmed)
        assert view.lines == (trimmed.count("\n") + 1 if trimmed else 0)


@given(st.text(alphabet=st.sampled_from("ab%2F0 é/#<>\udcff"), max_size=20) | st.text(max_size=20))
@settings(max_examples=300, deadline=None)
def test_unquote_is_urllibs(t: str) -> None:
    """index.unquote imports urllib.parse only for a text with a "%": the same answer either way."""
    from urllib.parse import unquote

    assert index.unquote(t) == unquote(t)


_PIECES = ["- [E{i}](e{i}.md) — hook {i}\n", "<!-- c{i}\n-->\n", "```\n- [F{i}](f{i}.md) — fenced\n```\n",
           "plain line {i}\n", "\n", "- [W{i}](w{i}.md) — " + "x" * 300 + "\n"]


@given(st.lists(st.integers(min_value=0, max_value=len(_PIECES) - 1), min_size=150, max_size=320),
       st.booleans())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_measure_names_the_hidden_entries_a_full_parse_names(kinds: list[int], front: bool) -> None:
    """measure parses only the lines past the cut (the over-budget hooks); the same hidden entries."""
    text = ("---\nname: x\n---\n" if front else "") + "".join(_PIECES[k].format(i=i) for i, k in enumerate(kinds))
    b = index.measure(text)
    view = index.loaded_view(text)
    assert b.hidden == [e for e in index.parse(text).entries if e.line not in view.visible]
