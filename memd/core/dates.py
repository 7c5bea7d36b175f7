"""Relative dates ("yesterday", "next Thursday", "昨天") in memory files, which go stale (pure)."""

from __future__ import annotations

import functools
import posixpath
import re

from memd.core import index
from memd.core.files import FileRecord
from memd.core.findings import Finding
from memd.core.findings import finding as _f
from memd.core.links import mask_code

_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
# Matched against lower-cased lines (a case-insensitive regex is ~4x slower in the re module).
_RELATIVE = (
    r"\b(?:yesterday|today|tomorrow|tonight"
    r"|the\s+day\s+(?:before|after)\s+(?:yesterday|tomorrow)"
    r"|(?:last|next|this|coming|past)\s+(?:" + _WEEKDAYS + r"|week(?:end)?|month|year|night|morning|"
    r"afternoon|evening)"
    r"|(?:a|one|two|three|four|five|six|seven|\d+)\s+(?:days?|weeks?|months?|years?)\s+ago"
    r"|in\s+(?:a|one|two|three|\d+)\s+(?:days?|weeks?)"
    r")\b"
    r"|昨天|今天|明天|前天|后天|昨晚|今晚|明晚|上周|下周|本周|这周|上星期|下星期|这星期|上个月|下个月|本月|这个月"
    r"|去年|明年|今年|昨日|今日|明日|先週|来週|今週|先月|来月|今月")
# Every match of _RELATIVE contains one of these (checked first: most files hold none of them).
_DATE_NEEDLES = ("day", "tomorrow", "night", "ago", "week", "month", "year", "morning", "afternoon", "evening")
_DATE_NEEDLES_CJK = ("天", "晚", "周", "星期", "月", "年", "日", "週")
_ABSOLUTE = (
    r"(?<!\d)\d{4}-\d{1,2}-\d{1,2}(?!\d)|(?<!\d)\d{4}/\d{1,2}/\d{1,2}(?!\d)|(?<![\d/])\d{1,2}/\d{1,2}/\d{2,4}(?![\d/])"
    r"|\d{4}\s*年\s*\d{1,2}\s*月(?:\s*\d{1,2}\s*[日号])?"
    r"|(?i:\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d{1,2}(?:st|nd|rd|th)?,?\s+\d{4}\b"
    r"|\b\d{1,2}(?:st|nd|rd|th)?\s+(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?,?\s+\d{4}\b)")


@functools.cache
def _relative() -> re.Pattern[str]:
    return re.compile(_RELATIVE)  # compiled on first use: most folders never need it


@functools.cache
def _absolute() -> re.Pattern[str]:
    return re.compile(_ABSOLUTE)


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _anchor(rec: FileRecord) -> str | None:
    """An absolute date the file itself carries (its name, or its frontmatter's name/description)."""
    m = _absolute().search(posixpath.basename(rec.rel))
    if m:
        return m.group(0)
    tf = rec.topic
    if tf is not None:
        for v in (tf.name, tf.description):
            if v:
                m = _absolute().search(v)
                if m:
                    return m.group(0)
    return None


def relative_dates(rec: FileRecord, today: str | None = None, said_on: tuple[str, ...] = ()) -> list[Finding]:
    """MEM040/MEM041 for each line with a relative date and no absolute one. ``said_on``: the days of the
    sessions a catch-up wrote the file from (memd.memfolder.saidon), which MEM040's hint proposes."""
    text = rec.text or ""
    low = text.lower()
    needles = _DATE_NEEDLES if low.isascii() else _DATE_NEEDLES + _DATE_NEEDLES_CJK
    present = [needle for needle in needles if needle in low]
    if not present:
        return []
    # the lines worth a closer look: those holding a needle (every match does, on its own line),
    # found with str.find rather than the relative-date regex over the whole text
    hit_lines: set[int] | None = None
    if len(low) == len(text):
        starts: list[int] = []
        for needle in present:
            at = low.find(needle)
            while at >= 0:
                starts.append(at)
                at = low.find(needle, at + len(needle))
        starts.sort()
        hit_lines, pos, line_no = set(), 0, 1
        for at in starts:
            line_no += low.count("\n", pos, at)
            pos = at
            hit_lines.add(line_no)
    out: list[Finding] = []
    fence: str | None = None
    anchor: str | None = None
    anchored = False
    for n, raw in enumerate(index.split_lines(text), 1):
        m = _FENCE.match(raw) if ("`" in raw[:4] or "~" in raw[:4]) else None
        if m:
            mark = m.group(1)
            if fence is None:
                fence = mark[0] * len(mark)
            elif mark.startswith(fence):
                fence = None
            continue
        if fence is not None or (hit_lines is not None and n not in hit_lines):
            continue
        line = mask_code(raw)
        low_line = line.lower()
        rel = _relative().search(low_line)
        if rel is None or _absolute().search(line):
            continue
        if not anchored:
            anchor, anchored = _anchor(rec), True
        word = line[rel.start():rel.end()] if len(low_line) == len(line) else rel.group(0)
        if anchor is not None:
            out.append(_f("MEM041", rec.rel, n, f"relative date {word!r}; the file is dated {anchor}, but "
                                                "an absolute date on the line is clearer"))
        else:
            out.append(_f("MEM040", rec.rel, n, f"relative date {word!r} with no absolute date; it will be "
                                                f"wrong tomorrow (write e.g. {_example(rec, today, said_on)})"))
    return out


def _example(rec: FileRecord, today: str | None, said_on: tuple[str, ...] = ()) -> str:
    """An absolute date to suggest: the day of the session a catch-up wrote the file from (a relative
    date there means a day of that session, which may be days before the file was written), else the day
    the file last changed (local time), else today (the caller says which day that is: the core reads no
    clock)."""
    import time

    if len(said_on) == 1:
        return f"{said_on[0]}, the day of the session a catch-up wrote this from"
    if said_on:
        return f"{' or '.join(said_on[-3:])}, the days of the sessions a catch-up wrote this from"

    if rec.mtime is not None:
        return f"{time.strftime('%Y-%m-%d', time.localtime(rec.mtime))}, the day the file last changed"
    return f"{today}, today" if today else "an absolute date such as 2026-01-31"
