"""MEMORY.md: its entries, and the view Claude Code loads into a session (facts.md section 2).

Pure functions of text, stdlib only (the hooks measure the index on every memory write).

Loading, as Claude Code 2.1.328 does it (read from its behaviour and checked against the real CLI
by ``tests/realcc``): ``source`` strips frontmatter and top-level HTML comments; the text is
trimmed (JavaScript's trim: a BOM goes), counted raw in UTF-16 units (a CRLF's "\r" counts
unless the comment pass normalised line ends), cut to ``max_lines`` lines, then at the last
newline before ``max_chars`` (or at ``max_chars`` when the first line alone is longer), and a
warning is appended; invisible characters are removed from the text only after counting.
Whatever lies past the cut is invisible to the model: entries there are "hidden".
"""

from __future__ import annotations

import re
from bisect import bisect_right
from itertools import accumulate

from memd.record import Record, field

TYPE_CHECKING = False  # (typing is not imported at run time: the hooks measure through here)
if TYPE_CHECKING:
    from collections.abc import Container

# The patterns are strings compiled on first use (re's cache): measuring an index in a hook needs none of
# them, and compiling them at import cost every SessionStart and PostToolUse ~1 ms. ``ENTRY`` is still a
# module attribute (``__getattr__`` below), compiled when first asked for.
_ENTRY = (
    r"^(?P<indent>[ \t]*)[-*+][ \t]+\[(?P<title>(?:[^\]\\]|\\.)*)\]\((?P<target><[^>]*>|[^)\s]*)"
    r"(?:[ \t]+\"[^\"]*\")?\)(?P<rest>.*)$")
_HOOK_SEP = r"^\s*(?:[—–:]|-{1,2})\s*"
ENTRY: re.Pattern[str]  # an index entry line: __getattr__ compiles _ENTRY


def __getattr__(name: str) -> object:
    if name == "ENTRY":
        rx = globals()["ENTRY"] = re.compile(_ENTRY)
        return rx
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def split_lines(text: str) -> list[str]:
    """Lines as Claude Code sees them: split on "\n" only (a CRLF's "\r" dropped), unlike
    ``str.splitlines``, which also splits on form feeds, U+2028 and other separators."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit Claude Code counts in."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def line_length(line: str) -> int:
    """The length of one index line as memd reports and limits it everywhere (check's MEM004, the
    PostToolUse note, rebuild's shortening): UTF-16 units, as Claude Code counts, of the line
    without its line end (a CRLF's "\r" is the line end, not text); trailing spaces count."""
    return utf16_len(line[:-1] if line.endswith("\r") else line)


def long_lines(idx: Index, limit: int) -> list[tuple[int, int]]:
    """(line number, length) of every index line longer than ``limit`` (frontmatter and comments,
    which Claude Code strips, are not index lines)."""
    return [(n, length) for n, ln in enumerate(idx.lines, 1)
            if n not in idx.masked and (length := line_length(ln)) > limit]


def unquote(t: str) -> str:
    """``urllib.parse.unquote(t)``, which returns a text without ``%`` as it is: only a text with one
    imports ``urllib.parse`` (with ``ipaddress``, a tenth of an interpreter start, which the hooks
    paid to list the hidden entries of an over-budget index)."""
    if "%" not in t:
        return t
    from urllib.parse import unquote as decode

    return decode(t)


class Entry(Record):
    line: int  # 1-based line in the file
    title: str
    target: str  # link target as written (may be URL-encoded or in <>)
    hook: str  # the text after the link, separator removed
    text: str  # the whole line, without its newline

    @property
    def file(self) -> str:
        """The link target as a relative path, decoded (what it points to on disk)."""
        t = self.target
        if t.startswith("<") and t.endswith(">"):
            t = t[1:-1]
        t = t.split("#", 1)[0]
        return unquote(t)

    @property
    def is_local(self) -> bool:
        t = self.file
        return bool(t) and not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", t)


class Index(Record):
    text: str
    lines: list[str]  # the file's lines without their endings
    entries: list[Entry]
    masked: frozenset[int] = field(default_factory=frozenset)  # 1-based lines in frontmatter/comments
    fenced: frozenset[int] = field(default_factory=frozenset)  # 1-based lines of fenced code (loaded, not entries)
    open_fence: bool = False  # the text ends inside a code fence that is never closed
    open_comment: bool = False  # a top-level "<!--" is never closed (Claude Code loads it as text)
    src: Source | None = None  # what Claude Code measures (``source``), kept for ``loaded_view``

    @property
    def open_at_end(self) -> bool:
        return self.open_fence or self.open_comment

    def inside_block(self, n: int) -> bool:
        """True when a line inserted after line n would land inside fenced code or a comment."""
        last = n == len(self.lines)
        if n in self.fenced and (n + 1 in self.fenced or (last and self.open_fence)):
            return True
        return n in self.masked and (n + 1 in self.masked or (last and self.open_comment))


# JavaScript's String.prototype.trim and regex \s: WhiteSpace (BOM included) and LineTerminator.
# Python's str.strip differs (it strips U+001C-U+001F and U+0085, keeps U+FEFF).
JS_SPACE = ("\t\n\x0b\x0c\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
            "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff")
_JS_S = f"[{JS_SPACE}]"
# Claude Code's frontmatter regex, /^---\s*\n([\s\S]*?)---\s*\n?/: it closes at the first "---"
# anywhere after the opening line, and eats the blank space after it.
# Patterns used only on some texts (frontmatter, comments, non-ASCII) stay strings, compiled on first
# use through re's own cache: compiling them at import cost every hook run about 10 ms.
_FRONTMATTER = f"---{_JS_S}*\n[\\s\\S]*?---{_JS_S}*\n?"
_ASTRAL = "[\U00010000-\U0010ffff]"
_LIST_ITEM = r"^( {0,3})([*+-]|\d{1,9}[.)])( {1,4}(?! )|[ \t]*$)"
_BLOCK_START = (r"^ {0,3}(?:<!--|#{1,6}(?:[ \t]|$)|>|`{3,}|~{3,}"
                r"|(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$)")


def strip_comments(text: str) -> str:
    """text without its ``<!-- ... -->`` comments (each closes at the first ``-->`` after it), as
    ``re.sub(r"<!--[\\s\\S]*?-->", "", text)`` does, in one pass: that pattern rescanned the rest of
    the text from every ``<!--`` when no ``-->`` followed."""
    out: list[str] = []
    at = 0
    while (start := text.find("<!--", at)) >= 0:
        end = text.find("-->", start + 4)
        if end < 0:
            break  # nor does any later "<!--" close
        out.append(text[at:start])
        at = end + 3
    out.append(text[at:])
    return "".join(out)


def js_string(text: str) -> str:
    """``text`` as a JavaScript string: characters outside the BMP as two surrogates, so that
    ``len``, slicing and ``find`` count UTF-16 units as Claude Code does."""
    if text.isascii() or len(text.encode("utf-16-le", "surrogatepass")) == 2 * len(text):  # no astral character
        return text
    return re.sub(_ASTRAL, _pair, text)


def _pair(m: re.Match[str]) -> str:
    c = ord(m.group()) - 0x10000
    return chr(0xD800 + (c >> 10)) + chr(0xDC00 + (c & 0x3FF))


def _indent(ln: str) -> int:
    n = 0
    for ch in ln:
        if ch == " ":
            n += 1
        elif ch == "\t":
            n += 4 - n % 4
        else:
            break
    return n


class Source(Record):
    """The text Claude Code measures, before trimming (JavaScript string form, see ``js_string``),
    as pieces that each come from one file line."""
    text: str
    starts: tuple[int, ...]  # offset of each piece in text
    lines: tuple[int, ...]  # 1-based file line of each piece
    masked: frozenset[int]  # file lines that are wholly frontmatter or a stripped comment
    open_comment: int  # the file line of a top-level "<!--" that is never closed (kept as text), or 0


# Claude Code before 2.1.330 lost the link reference definitions (``[ref]: url "title"``) of a
# MEMORY.md holding an HTML comment (its Markdown lexer ate them); from 2.1.330 they are kept. Observed
# with the real CLI (tests/realcc): top-level definitions only (not inside a list item, nor inside a
# paragraph, which a definition cannot interrupt). ``refdefs=False`` models the older versions.
REFDEFS_KEPT_SINCE = (2, 1, 330)
_REFDEF = (r"^ {0,3}\[(?:[^\]\\\n]|\\.){1,999}\]:[ \t]*(?:<[^<>\n]*>|[^\s<>]\S*)"
           r"(?:[ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?[ \t]*$")


def keeps_refdefs(version: tuple[int, int, int] | None) -> bool:
    """Whether the Claude Code of ``version`` keeps link reference definitions (unknown: the newest does)."""
    return version is None or version >= REFDEFS_KEPT_SINCE


def source(text: str, refdefs: bool = True) -> Source:
    """What Claude Code 2.1.328 makes of MEMORY.md before counting (facts.md section 2):

    - frontmatter by its regex (a leading BOM skipped for the match only);
    - if what is left contains "<!--", its Markdown lexer: line ends normalised, and each top-level
      HTML block that starts with "<!--" and holds a "-->" loses its comments (text after "-->" on the
      closing line stays, and the block goes whole, blank lines after it included, when nothing else is
      left). Comments in code fences, under list items or indented as code are not top-level; an
      unclosed "<!--" is kept as text. Otherwise the text is kept raw (a CRLF's "\r" counts).
    """
    js = js_string(text)
    raw = js.split("\n")
    body = js[1:] if js.startswith("\ufeff") else js
    if "<!--" not in js and not body.startswith("---"):  # the common case: the text as it is
        return Source(js, (0, *accumulate(len(ln) + 1 for ln in raw[:-1])), tuple(range(1, len(raw) + 1)),
                      frozenset(), 0)
    pieces: list[tuple[int, str]] = [(n, ln + "\n") for n, ln in enumerate(raw, 1)]
    pieces[-1] = (len(raw), raw[-1])
    masked: set[int] = set()
    if body.startswith("---") and body.find("---", 3) >= 0:
        m = re.match(_FRONTMATTER, body)
        if m:
            skip = len(js) - len(body)
            off = skip + m.end()
            first = js.count("\n", 0, off)  # the piece the text now starts in (0-based)
            closing = js.count("\n", 0, skip + len(m.group().rstrip(JS_SPACE)))
            rest = pieces[first][1][off - (js.rfind("\n", 0, off) + 1):]
            masked.update(range(1, closing + 2))
            if rest.strip(JS_SPACE):
                masked.discard(first + 1)
            pieces = [(first + 1, rest), *pieces[first + 1:]]
    open_comment = 0
    if any("<!--" in t for _, t in pieces):
        pieces, open_comment = _strip_comments(pieces, masked, refdefs)
    pieces = [p for p in pieces if p[1]]
    starts: list[int] = []
    acc = 0
    for _, t in pieces:
        starts.append(acc)
        acc += len(t)
    return Source("".join(t for _, t in pieces), tuple(starts), tuple(n for n, _ in pieces),
                  frozenset(masked), open_comment)


def frontmatter_end(text: str) -> int:
    """The 1-based line that closes what Claude Code reads as MEMORY.md's frontmatter (its regex: a
    first line of "---", closed by the first "---" anywhere after it), 0 when there is none. Lines
    1 to that line never load, whatever they hold: two rule lines at the top hide the entries between."""
    body = text[1:] if text.startswith("\ufeff") else text
    if not body.startswith("---") or body.find("---", 3) < 0:
        return 0
    m = re.match(_FRONTMATTER, body)
    if m is None:
        return 0
    closing = len(m.group().rstrip(JS_SPACE))
    return body.count("\n", 0, closing) + 1


_FENCE = r"^ {0,3}(`{3,}|~{3,})"
_HTML_BLOCK = r"^ {0,3}</?[A-Za-z][A-Za-z0-9-]*(?:[ \t/>]|$)"


def _fence_closes(ln: str, fence: str) -> bool:
    lead = ln.lstrip(" \t")
    m = re.match(_FENCE, lead)
    return m is not None and m.group(1).startswith(fence) and not lead[m.end():].strip()


def _strip_comments(pieces: list[tuple[int, str]], masked: set[int],
                    refdefs: bool = True) -> tuple[list[tuple[int, str]], int]:
    """Claude Code's lexer pass (see ``source``), line by line: a model of the few Markdown blocks
    that decide whether a comment is top-level (fences, list items, indented code, HTML blocks)."""
    pieces = [(n, t.replace("\r\n", "\n").replace("\r", "\n")) for n, t in pieces]
    out: list[tuple[int, str]] = []
    fence = ""
    list_w: int | None = None
    html, prev_blank = False, True
    para = False  # the previous line is paragraph text at the top level (a definition cannot interrupt it)
    i = 0
    while i < len(pieces):
        n, t = pieces[i]
        ln = t[:-1] if t.endswith("\n") else t
        i += 1
        if fence:
            fence = "" if _fence_closes(ln, fence) else fence
            out.append((n, t))
            para = False
            continue
        blank = not ln.strip(" \t")
        if blank or html:
            html = html and not blank
            prev_blank = blank
            out.append((n, t))
            para = False
            continue
        ind = _indent(ln)
        lead = ln.lstrip(" \t")
        item = re.match(_LIST_ITEM, ln)
        if list_w is not None and ind >= list_w:
            pass  # inside the list item: nothing here is top-level
        elif item:
            gap = item.group(3)
            gap_w = len(gap) if 0 < len(gap) <= 4 and "\t" not in gap else 1
            list_w = len(item.group(1)) + len(item.group(2)) + gap_w
        elif list_w is not None and not prev_blank and not re.match(_BLOCK_START, ln):
            pass  # a lazy continuation line of the item's paragraph
        else:
            list_w = None
            if not refdefs and not para and ind <= 3 and lead.startswith("[") and re.match(_REFDEF, ln):
                continue  # a link reference definition: lost by Claude Code's lexer before 2.1.330
            if ind <= 3 and lead.startswith("<!--"):
                j, pos = i - 1, t.find("-->", t.find("<!--") + 4)
                while pos < 0 and j + 1 < len(pieces):
                    j += 1
                    pos = pieces[j][1].find("-->")
                if pos < 0:  # never closed: the lexer's block runs to the end and is kept
                    out.append((n, t))
                    out.extend(pieces[i:])
                    return out, n
                k = j + 1
                while k < len(pieces) and pieces[k][1] == "\n":
                    k += 1
                residue = strip_comments("".join(p[1] for p in pieces[i - 1:k]))
                masked.update(p[0] for p in pieces[i - 1:j])
                if residue.strip(JS_SPACE):
                    out.append((pieces[j][0], residue))
                else:
                    masked.add(pieces[j][0])
                i, prev_blank, para = k, True, False
                continue
            if ind <= 3 and re.match(_HTML_BLOCK, ln):
                html = True
        top = list_w is None
        opens = re.match(_FENCE, lead)
        if opens:
            fence = opens.group(1)
        para = top and not opens and not html and not re.match(_BLOCK_START, ln)
        prev_blank = False
        out.append((n, t))
    return out, 0


def _fenced_lines(lines: list[str], masked: frozenset[int]) -> tuple[set[int], bool]:
    """1-based lines of fenced code blocks, fences included (a list item there is an example, not an
    entry), and whether the last block is left open."""
    fenced: set[int] = set()
    fence: str | None = None
    for n, ln in enumerate(lines, 1):
        if n in masked:
            continue
        m = re.match(_FENCE, ln) if ("`" in ln[:4] or "~" in ln[:4]) else None
        if fence is not None:
            fenced.add(n)
            if m and m.group(1).startswith(fence) and not ln[m.end():].strip():
                fence = None
        elif m:
            fence = m.group(1)[0] * len(m.group(1))
            fenced.add(n)
    return fenced, fence is not None


def parse(text: str, *, refdefs: bool = True, src: Source | None = None,
          skip: Container[int] = frozenset()) -> Index:
    """The index parsed: its lines, entries, masked and fenced lines. ``src``: ``source(text, refdefs)``
    when the caller has it; ``skip``: lines whose entries are not wanted (``measure`` wants only those past
    the cut: the rest are neither matched nor built; the Index then holds only the others)."""
    lines = split_lines(text)
    src = src if src is not None else source(text, refdefs)
    masked = src.masked
    fenced, open_fence = _fenced_lines(lines, masked) if "``" in text or "~~" in text else (set(), False)
    entries: list[Entry] = []
    entry_rx = re.compile(_ENTRY)
    for n, ln in enumerate(lines, 1):
        if n in masked or n in fenced or n in skip:
            continue
        m = entry_rx.match(ln)
        if m:
            hook = re.sub(_HOOK_SEP, "", m.group("rest"), count=1).strip()
            title = m.group("title").replace("\\]", "]").replace("\\[", "[")
            entries.append(Entry(n, title, m.group("target"), hook, ln))
    return Index(text, lines, entries, masked, frozenset(fenced), open_fence, src.open_comment > 0, src)


class LoadedView(Record):
    text: str  # exactly what the session sees
    lines: int  # lines of the stripped, trimmed index (before any cut)
    chars: int  # UTF-16 units of the stripped, trimmed index (before any cut)
    visible: frozenset[int]  # 1-based file lines that reach the session
    cut_by: str | None  # None, "lines" or "chars"
    max_lines: int
    max_chars: int

    @property
    def truncated(self) -> bool:
        return self.cut_by is not None


def _size(units: int) -> str:
    """Claude Code's size figure: "24.4KB", "27KB", "900 bytes"."""
    kb = units / 1024
    if kb < 1:
        return f"{units} bytes"
    return f"{kb:.1f}".removesuffix(".0") + "KB"


def _shorten(text: str, n: int) -> str:
    if len(text) <= n:
        return text
    head = text[:n - 1]
    m = re.search(f"{_JS_S}[^{JS_SPACE}]*$", head)
    word = head[:m.start()].rstrip(JS_SPACE) if m else ""
    return (word if len(word) > n / 2 else head.rstrip(JS_SPACE)) + "\u2026"


def warning_line(trimmed: str, kept: int, max_lines: int, max_chars: int) -> str:
    """Claude Code's warning after a cut index (2.1.328, word for word): ``trimmed`` is the whole
    trimmed text, ``kept`` how many of its units were loaded."""
    total = trimmed.count("\n") + 1
    over_lines, over_chars = total > max_lines, len(trimmed) > max_chars
    kept_lines = trimmed.count("\n", 0, kept) + 1 if trimmed[kept:kept + 1] == "\n" else 0
    if kept_lines == 0:
        where = f"everything after the first {kept} characters of line 1 was cut off"
    else:
        nxt = trimmed.find("\n", kept + 1)
        first = trimmed[kept + 1:nxt if nxt >= 0 else len(trimmed)].strip(JS_SPACE)
        where = (f"{total - kept_lines} of {total} lines were cut off, starting at line {kept_lines + 1}"
                 + (f' ("{_shorten(first, 80)}")' if first else ""))
    if over_chars and not over_lines:
        what = f"{_size(len(trimmed))} (limit: {_size(max_chars)}) \u2014 index entries are too long"
    elif over_lines and not over_chars:
        what = f"{total} lines (limit: {max_lines})"
    else:
        what = f"{total} lines and {_size(len(trimmed))}"
    return (f"> WARNING: MEMORY.md is {what}. Only part of it was loaded: {where}. Keep index entries "
            "to one line under ~200 chars; move detail into topic files.")


# Removed from the loaded text after counting, as Claude Code's filter does: format (Cf), private-use,
# surrogate and other default-ignorable characters, C0/C1 controls but tab and newline; ZWNJ, ZWJ and
# the emoji variation selectors stay. (Claude Code also drops unassigned code points, which depend on
# its Unicode version: not modelled.)
_INVISIBLE = (
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891"
    "\u08e2\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b\u200e-\u200f\u202a-\u202e\u2060-\u206f\u3164"
    "\ud800-\uf8ff\ufe00-\ufe0d\ufeff\uffa0\ufff0-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff\U000f0000-\U0010ffff]")


_ASCII_INVISIBLE = "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]"  # _INVISIBLE's ASCII part


def _clean(js: str) -> str:
    """The loaded text as the session gets it: ``js`` (JavaScript string form) with line ends
    normalised and invisible characters removed; a surrogate the cut left alone is lost."""
    text = js if js.isascii() else js.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "ignore")
    if "\r" in text or "\u2028" in text or "\u2029" in text:
        text = re.sub("\r\n?|[\u2028\u2029]", "\n", text)
    return re.sub(_ASCII_INVISIBLE, "", text) if text.isascii() else without_invisible(text)


_INVISIBLE_RANGES: tuple[int, ...] = ()  # _INVISIBLE as sorted [first, last] pairs, flattened (read on first use)


def without_invisible(text: str) -> str:
    """``re.sub(_INVISIBLE, "", text)`` without compiling ``_INVISIBLE``: compiling that class (astral
    ranges included) cost a hook run that measures a non-ASCII index ~5 ms. The text's distinct
    characters are looked up in the class's ranges, and the invisible ones dropped with translate."""
    global _INVISIBLE_RANGES
    if not _INVISIBLE_RANGES:
        body, flat, i = _INVISIBLE[1:-1], [], 0  # literal characters and "a-b" ranges, in order
        while i < len(body):
            if i + 2 < len(body) and body[i + 1] == "-":
                flat += [ord(body[i]), ord(body[i + 2])]
                i += 3
            else:
                flat += [ord(body[i])] * 2
                i += 1
        _INVISIBLE_RANGES = tuple(flat)
    drop = {o: None for o in map(ord, set(text)) if _in_ranges(_INVISIBLE_RANGES, o)}
    return text.translate(drop) if drop else text


def _in_ranges(flat: tuple[int, ...], o: int) -> bool:
    k = bisect_right(flat, o)  # odd: inside a range; even: past one (o is its last, or outside)
    return bool(k % 2) or (k > 0 and flat[k - 1] == o)


def loaded_view(text: str, max_lines: int = 200, max_chars: int = 25_000, *, idx: Index | None = None,
                refdefs: bool = True, src: Source | None = None) -> LoadedView:
    """The index as a session sees it (``idx``: the text already parsed, to save parsing it again).
    Counts are in UTF-16 units of the text ``source`` gives; ``visible`` holds every file line of
    which at least one unit is loaded (a line cut in its middle is visible). ``refdefs``: see
    ``keeps_refdefs`` (``idx`` must have been parsed with the same value)."""
    if src is None:
        src = idx.src if idx is not None and idx.src is not None else source(text, refdefs)
    content = src.text
    a = len(content) - len(content.lstrip(JS_SPACE))
    trimmed = content[a:len(content.rstrip(JS_SPACE))]
    if not trimmed:
        return LoadedView("", 0, 0, frozenset(), None, max_lines, max_chars)
    total_lines, total_chars = trimmed.count("\n") + 1, len(trimmed)
    kept = total_chars
    cut_by: str | None = None
    if total_lines > max_lines:
        cut_by = "lines"
        kept = -1
        for _ in range(max_lines):
            kept = trimmed.find("\n", kept + 1)
    if kept > max_chars:
        cut_by = "chars"
        nl = trimmed.rfind("\n", 0, max_chars + 1)
        kept = nl if nl > 0 else max_chars
    body = trimmed[:kept]
    if cut_by is not None:
        body += "\n\n" + warning_line(trimmed, kept, max_lines, max_chars)
    first = bisect_right(src.starts, a) - 1
    last = bisect_right(src.starts, a + kept - 1) - 1
    visible = frozenset(src.lines[first:last + 1])
    return LoadedView(_clean(body), total_lines, total_chars, visible, cut_by, max_lines, max_chars)


class Budget(Record):
    lines: int
    chars: int
    max_lines: int
    max_chars: int
    hidden: list[Entry]
    level: str  # "ok", "near" or "over"

    @property
    def line_ratio(self) -> float:
        return self.lines / self.max_lines

    @property
    def char_ratio(self) -> float:
        return self.chars / self.max_chars


def measure(text: str, max_lines: int = 200, max_chars: int = 25_000, warn_ratio: float = 0.8,
            *, idx: Index | None = None, refdefs: bool = True) -> Budget:
    """Measure an index against its budget: figures, level and the entries that are hidden
    (``refdefs``: the loading of the Claude Code version the user runs, ``keeps_refdefs``)."""
    src = idx.src if idx is not None and idx.src is not None else source(text, refdefs)
    view = loaded_view(text, max_lines, max_chars, idx=idx, refdefs=refdefs, src=src)
    # Nothing cut: every entry is visible (entries are non-blank lines outside frontmatter and comments,
    # all within the trimmed text), so a text not parsed yet is not parsed for this (the hooks' case).
    # Cut: a text not parsed yet is parsed for the entries past the cut only (the over-budget hooks).
    if view.truncated:
        idx = idx if idx is not None else parse(text, refdefs=refdefs, src=src, skip=view.visible)
        hidden = [e for e in idx.entries if e.line not in view.visible]
    else:
        hidden = []
    if view.truncated:
        level = "over"
    elif view.lines >= warn_ratio * max_lines or view.chars >= warn_ratio * max_chars:
        level = "near"
    else:
        level = "ok"
    return Budget(view.lines, view.chars, max_lines, max_chars, hidden, level)
