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
