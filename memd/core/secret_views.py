"""Secrets written so that a pattern misses them: the views of a text the rules also run over, and
the detectors a pattern cannot express (pure; stdlib only: the PreToolUse hook runs this).

``find(text, rule_spans)`` is every secret of a text as (kind, start, end) in the text's own
offsets, ``rule_spans`` being the rule engine (``memd.core.fastscan``'s, or every rule for the
reference). Beyond the rules over the text as written:

- the text normalised (``normalise``): each character NFKC-folded (fullwidth ``ｓｋ－`` is ``sk-``),
  format characters (zero-width space, joiners, soft hyphen, BOM, bidi marks) removed; plain ASCII,
  the common case, is already that and is not copied;
- a token split by a space or tab (``AKIA… 7EXA…``): runs of token-like pieces joined, the rules run
  over the joined run, and a match that crosses a join counts when it holds a digit;
- a key spaced one character at a time (``g h p _ 1 a B …``), and a token split over two lines with no
  word around it (a run that ends a line joined to the one that starts the next: only a provider's
  shape counts across the break);
- a random-looking value next to a word that says what it is ("the database password is …",
  "api key: …"): ``_CONTEXT`` and ``looks_random``;
- a bare AWS secret access key (40 characters of base64 with upper case, lower case and digits,
  random enough), without the ``aws_secret_access_key =`` the rule needs;
- base64 runs that decode to text: the decoded text is scanned again (twice deep at most);
- a private key's body without its BEGIN line: base64 lines whose first bytes decode to the DER
  header of a private key (a SEQUENCE, then version 0 or 1) or to OpenSSH's ``openssh-key-v1``.

Every pattern here is linear (tests/test_regex_linear.py lists it) and each detector is gated by
what it needs (non-ASCII, a long enough token, a secret-ish word), so the hook pays little on prose.
The patterns are strings compiled on first use (``re``'s own cache): a hook run compiles only those
of the detectors its text reaches, not all ten at import.
"""

from __future__ import annotations

import re

from memd.core.secret_rules import harmless

TYPE_CHECKING = False  # typing costs ~3 ms to import; the PreToolUse hook loads this module
if TYPE_CHECKING:
    from collections.abc import Callable

    from memd.core.secret_rules import Span

    RuleSpans = Callable[[str], list[Span]]

MAX_DEPTH = 2  # base64 inside base64: scanned twice deep, no further

# --------------------------------------------------------------------------- normalising


class View:
    """A text as the rules see it, and the way back: ``where(i)`` is the offset in the original
    text of the view's character i (``where(len(view))`` is the original's length)."""

    __slots__ = ("_marks", "_orig", "text")

    def __init__(self, text: str, marks: list[tuple[int, int, bool]], orig_len: int) -> None:
        self.text = text
        # (view offset, original offset, same length): from each mark on, the view runs along the
        # original character for character (True) or holds one original character's expansion (False)
        self._marks = marks
        self._orig = orig_len

    def where(self, i: int) -> int:
        from bisect import bisect_right

        k = bisect_right(self._marks, (i, self._orig + 1, True)) - 1
        if k < 0:
            return i
        v, o, same = self._marks[k]
        return o + (i - v) if same else o

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original span of view[start:end] (end > start)."""
        a = self.where(start)
        b = self.where(end - 1)
        return a, max(b + 1, a + 1) if end > start else a


_NON_ASCII = r"[^\x00-\x7f]+"


def normalise(text: str) -> View | None:
    """The text with each character NFKC-normalised and format characters (category Cf: zero-width
    space and joiners, soft hyphen, BOM, bidi marks) removed; None when that changes nothing (any
    plain ASCII text)."""
    if text.isascii():
        return None
    import unicodedata

    parts: list[str] = []
    marks: list[tuple[int, int, bool]] = []
    at = vlen = 0
    cache: dict[str, str] = {}
    for m in re.finditer(_NON_ASCII, text):
        if m.start() > at:
            marks.append((vlen, at, True))
            parts.append(text[at:m.start()])
            vlen += m.start() - at
        for k, ch in enumerate(m.group(), m.start()):
            out = cache.get(ch)
            if out is None:
                out = cache[ch] = "" if unicodedata.category(ch) == "Cf" else unicodedata.normalize("NFKC", ch)
            if out:
                marks.append((vlen, k, out == ch or len(out) == 1))
                parts.append(out)
                vlen += len(out)
        at = m.end()
    if at < len(text):
        marks.append((vlen, at, True))
        parts.append(text[at:])
    view = "".join(parts)
    return None if view == text else View(view, marks, len(text))


# --------------------------------------------------------------------------- random-looking values

_PLACEHOLDER = ("xxx", "***", "...", "example", "your", "changeme", "redacted", "placeholder", "dummy", "sample",
                "<", ">", "${", "%(", "environ", "getenv", "process.env", "secrets.", "env[", "env(")


def entropy(s: str) -> float:
    """Shannon entropy of s in bits per character."""
    from math import log2

    n = len(s)
    counts: dict[str, int] = {}
    for ch in s:
        counts[ch] = counts.get(ch, 0) + 1
    return -sum(c / n * log2(c / n) for c in counts.values())


def looks_random(value: str) -> bool:
    """A value that looks machine-made or chosen to be hard to guess (``Xk9#mP2$vL``, a 32-digit hex
    token), not a word, a name, a path, a date, a version or a placeholder."""
    v = value.strip(".,;:!?)(][}{'\"`")
    if not 8 <= len(v) <= 128 or v[0] in "/~.$%@#&\\" or "://" in v or "\\" in v:
        return False  # a path, a variable, a URL, or text with escapes (JSON's "\n"): not one value
    if v.count("/") >= 2 or (v.count(".") == 1 and v.rsplit(".", 1)[1].isalpha() and len(v.rsplit(".", 1)[1]) <= 5):
        return False  # a path or a file name
    low = v.lower()
    if any(p in low for p in _PLACEHOLDER):
        return False
    upper = any(c.isupper() for c in v)
    lower = any(c.islower() for c in v)
    digit = any(c.isdigit() for c in v)
    symbol = any(not c.isalnum() for c in v)
    if not (upper or lower) or not (digit or symbol):
        return False
    if upper and not lower and not digit:
        return False  # AN_ENV_VAR_NAME
    if not upper and not lower:
        return False  # a number, a date, a version
    classes = upper + lower + digit + symbol
    h = entropy(v)
    if classes >= 3 and h >= 2.8 and (digit or sum(not c.isalnum() for c in v) >= 2):
        return True
    return len(v) >= 16 and digit and h >= 3.5 and sum(c.isdigit() for c in v) >= 4


# "the database password is …", "api key: …", "secret for staging = …": the word, then a
# random-looking value among the next six words on its line (bounded: linear)
_CONTEXT = (
    r"\b(?:password|passwd|passphrase|passcode|pwd|secret|token|api[ _-]?key|access[ _-]?key|"
    r"secret[ _-]?key|private[ _-]?key|credentials?|auth[ _-]?code)\b"
    r"(?=([^\n]{0,160}))")  # the rest of the line, looked at, not consumed: every keyword of a line is read
_CONTEXT_WORDS = ("pass", "pwd", "secret", "token", "key", "credential", "auth")


def _context(text: str) -> list[tuple[str, int, int]]:
    low = text.lower()  # the words matched in lower case (a case-insensitive pattern is ~4x slower)
    if not any(w in low for w in _CONTEXT_WORDS):
        return []
    if len(low) != len(text):  # a character whose lower case is longer: offsets would shift
        low = "".join(c.lower() if len(c.lower()) == 1 else c for c in text)
    out = []
    judged = -1  # words before this offset were judged already (by an earlier keyword of the line)
    for m in re.finditer(_CONTEXT, low):
        prev = ""
        for n, w in enumerate(re.compile(_WORD).finditer(text, m.start(1), m.end(1))):
            if n == 6:
                break
            word = w.group()
            if w.start() >= judged and looks_random(word) and not _hash_label(prev) and not _hash_label(word):
                out.append(("secret next to its name", w.start(), w.end()))
                judged = w.end()
            prev = word
    return out


_HASH_LABELS = ("sha1", "sha-1", "sha256", "sha-256", "sha384", "sha512", "sha-512", "md5", "blake2", "blake3",
                "crc32", "hash", "digest", "checksum", "integrity", "commit", "etag")


def _hash_label(word: str) -> bool:
    """A word that says the next value is a hash (``sha256:``, ``digest``), or a value labelled so
    itself (``sha256:9f86...``, ``sha512-...``): a hash is no secret."""
    low = word.lower().strip("\"'`(,")
    return low.rstrip(":=") in _HASH_LABELS or low.startswith(tuple(f"{h}{c}" for h in _HASH_LABELS for c in ":-="))


_WORD = r"[^\s\"'`]+"


# --------------------------------------------------------------------------- bare AWS secret keys

_AWS_SECRET = r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"


def _aws_secret(text: str) -> list[tuple[str, int, int]]:
    out = []
    for m in re.finditer(_AWS_SECRET, text):
        s = m.group()
        if (any(c.isupper() for c in s) and any(c.islower() for c in s) and any(c.isdigit() for c in s)
                and s.count("/") <= 4 and entropy(s) >= 4.3 and not harmless(s)):
            out.append(("AWS secret key", m.start(), m.end()))
    return out


# --------------------------------------------------------------------------- base64

_B64_RUN = r"(?<![A-Za-z0-9+/=_\-])[A-Za-z0-9+/_\-]{16,16384}={0,2}(?![A-Za-z0-9+/=_\-])"


def _decode(run: str) -> bytes | None:
    import binascii

    body = run.rstrip("=")
    if len(body) % 4 == 1:
        return None
    alt = "-" in body or "_" in body
    if alt and ("+" in body or "/" in body):
        return None
    if alt:
        body = body.replace("-", "+").replace("_", "/")
    try:
        return binascii.a2b_base64(body + "=" * (-len(body) % 4), strict_mode=True)
    except (binascii.Error, ValueError):
        return None


def _as_text(data: bytes) -> str | None:
    """data as text when it is text: UTF-8, nearly all printable."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    printable = sum(ch.isprintable() or ch in "\n\r\t" for ch in text)
    return text if text and printable >= 0.95 * len(text) else None


_UPPER_OR_DIGIT = r"[A-Z0-9]"
_LOWER = r"[a-z]"


def _base64(text: str, rule_spans: RuleSpans, depth: int) -> list[tuple[str, int, int]]:
    out = []
    for m in re.finditer(_B64_RUN, text):
        run = m.group()
        if re.search(_UPPER_OR_DIGIT, run) is None or re.search(_LOWER, run) is None:
            continue  # a word or a hex digest, not base64 of text
        data = _decode(run)
        if data and (is_private_key_der(data[:8]) or data.startswith(_OPENSSH)):
            out.append(("private key body", m.start(), m.end()))
            continue
        decoded = _as_text(data) if data else None
        if decoded is None:
            continue
        inner = find(decoded, rule_spans, depth + 1)
        if inner:
            out.append((f"{inner[0][0]} (base64-encoded)", m.start(), m.end()))
    return out


# --------------------------------------------------------------------------- private key bodies

_B64_LINE = r"(?m)^[ \t>]*([A-Za-z0-9+/]{40,}={0,2})[ \t]*\r?$"
_OPENSSH = b"openssh-key-v1\x00"


def is_private_key_der(head: bytes) -> bool:
    """The first bytes of a private key's DER: a SEQUENCE whose first element is the INTEGER 0
    (PKCS#1 RSA, PKCS#8, DSA) or 1 (SEC1 EC). A certificate or a public key starts with a
    SEQUENCE inside the SEQUENCE instead."""
    if len(head) < 5 or head[0] != 0x30:
        return False
    n = head[1]
    at = 2 + (n & 0x7F if n & 0x80 else 0)
    return head[at:at + 3] in (b"\x02\x01\x00", b"\x02\x01\x01")


def _key_bodies(text: str) -> list[tuple[str, int, int]]:
    out: list[tuple[str, int, int]] = []
    block_start = block_end = -1
    first = ""
    for m in re.finditer(_B64_LINE, text):
        if m.start() == block_end + 1 and block_start >= 0:
            block_end = m.end()
            continue
        if block_start >= 0:
            _key_block(first, block_start, block_end, out)
        block_start, block_end, first = m.start(), m.end(), m.group(1)
    if block_start >= 0:
        _key_block(first, block_start, block_end, out)
    return out


def _key_block(first: str, start: int, end: int, out: list[tuple[str, int, int]]) -> None:
    head = _decode(first[:64])
    if head is not None and (is_private_key_der(head) or head.startswith(_OPENSSH)):
        out.append(("private key body", start, end))


# --------------------------------------------------------------------------- split tokens

# A token-like piece: a whole run of token characters (from the run's start: linear) that holds a
# digit or a lower-upper step (CamelCase, random case), or an upper-case run of six or more.
_T = r"A-Za-z0-9_+/=.\-"
_PIECE = rf"(?<![{_T}])(?:(?=[{_T}]*?(?:\d|[a-z][A-Z]))[{_T}]{{4,}}+|[A-Z0-9_+/=.\-]{{6,}}+(?![{_T}]))"
_DIGIT = r"\d"


def _may_have_pieces(text: str) -> bool:
    """False when no join of pieces can count: without a digit or an upper-case letter, a piece is a
    run of ``_+/=.-`` alone, and a join of those has no digit and too little entropy (< 2.6 bits)."""
    return text.lower() != text or any(d in text for d in "0123456789")


def _split_tokens(text: str, rule_spans: RuleSpans) -> list[tuple[str, int, int]]:
    """Rule matches across runs of token-like pieces one space or tab apart, joined."""
    out: list[tuple[str, int, int]] = []
    group: list[tuple[int, str]] = []
    prev_end = -2
    for m in re.finditer(_PIECE, text):
        if group and m.start() == prev_end + 1 and text[prev_end] in " \t":
            group.append((m.start(), m.group()))
        else:
            if len(group) >= 2:
                _joined(group, rule_spans, out)
            group = [(m.start(), m.group())]
        prev_end = m.end()
    if len(group) >= 2:
        _joined(group, rule_spans, out)
    return out


def _joined(group: list[tuple[int, str]], rule_spans: RuleSpans, out: list[tuple[str, int, int]]) -> None:
    joined = "".join(p for _, p in group)
    if re.search(_DIGIT, joined) is None and entropy(joined) < 3.6:
        return  # words joined: no hit of theirs would count (below)
    starts: list[int] = []  # offset in joined of each piece
    n = 0
    for _, p in group:
        starts.append(n)
        n += len(p)
    from bisect import bisect_right

    for kind, a, b in rule_spans(joined):
        i, j = bisect_right(starts, a) - 1, bisect_right(starts, b - 1) - 1
        hit = joined[a:b]
        if i == j or not (any(c.isdigit() for c in hit) or entropy(hit) >= 3.6):
            continue  # inside one piece (the text as written has it), or words joined (no digit, few letters)
        out.append((kind, group[i][0] + a - starts[i], group[j][0] + b - starts[j]))


# --------------------------------------------------------------------------- escapes

# JSON's escapes that hide a key from a pattern: ghp\u005f..., https:\/\/hooks.slack.com\/..., and a
# pasted file's quotes and line breaks ("password: \"...\"", "-----BEGIN ...-----\nMII...")
_ESCAPE = r"\\u[0-9a-fA-F]{4}|\\[/\"nrt\\]"
_ESCAPED = {"/": "/", '"': '"', "n": "\n", "r": "\r", "t": "\t", "\\": "\\"}


def has_escapes(text: str) -> bool:
    return "\\" in text and ("\\u" in text or "\\/" in text or '\\"' in text or "\\n" in text)


def unescape(text: str) -> View | None:
    """text with JSON's escapes undone (``\\uXXXX``, ``\\/``, ``\\"``, ``\\n``...: a view, offsets mapped
    back), or None when it has none."""
    if not has_escapes(text):
        return None
    parts: list[str] = []
    marks: list[tuple[int, int, bool]] = []
    at = vlen = 0
    for m in re.finditer(_ESCAPE, text):
        if m.start() > at:
            marks.append((vlen, at, True))
            parts.append(text[at:m.start()])
            vlen += m.start() - at
        esc = m.group()
        ch = _ESCAPED[esc[1]] if len(esc) == 2 else chr(int(esc[2:], 16))
        marks.append((vlen, m.start(), False))
        parts.append(ch)
        vlen += 1
        at = m.end()
    if not marks:
        return None
    if at < len(text):
        marks.append((vlen, at, True))
        parts.append(text[at:])
    return View("".join(parts), marks, len(text))


# --------------------------------------------------------------------------- a prefix split from its key

# a provider's prefix, then blanks (one line break at most) before the rest of the key: "ghp_ 1a2B...",
# "AKIA\n7EXA..."; joined, the rules decide
_PREFIX_SPLIT = (r"\b(?:gh[pousr]_|github_pat_|glpat-|xox[abposr]-|sk-ant-|sk-proj-|sk-|sk_live_|rk_live_|npm_|hf_|"
                 r"AIza|AKIA|ASIA|pypi-|SG\.|dop_v1_|shpat_|whsec_|gsk_|GOCSPX-|ya29\.|lin_api_|glsa_|r8_|xapp-)"
                 r"(?:[ \t]+(?:\r?\n[ \t>]*)?|\r?\n[ \t>]*)(?=[A-Za-z0-9])")
_KEY_BODY = r"[A-Za-z0-9_\-+/=.]{1,512}"


def _prefix_split(text: str, rule_spans: RuleSpans) -> list[tuple[str, int, int]]:
    out: list[tuple[str, int, int]] = []
    body_rx = re.compile(_KEY_BODY)
    for m in re.finditer(_PREFIX_SPLIT, text):
        body = body_rx.match(text, m.end())
        if body is None:
            continue
        prefix = text[m.start():m.end()].rstrip(" \t\r\n>")
        joined = prefix + body.group()
        for kind, a, b in rule_spans(joined):
            if a == 0 and b > len(prefix):
                out.append((kind, m.start(), body.start() + b - len(prefix)))
                break
    return out


# --------------------------------------------------------------------------- spaced and line-split keys

# a key spaced one character at a time ("g h p _ 1 a B ..."): 16 or more characters, each one blank apart
_SPACED = r"(?<!\S)(?:\S[ \t]){15,1024}\S(?!\S)"
# a token split over two lines with no word around it: a run that ends its line, then one that starts the next
_LINE_PAIR = (rf"(?<![{_T}])([{_T}]{{8,1024}}+)[ \t]*+\r?\n[ \t>]*+(?=([{_T}]{{8,1024}}+))")
_TOKENISH = r"\d|[a-z][A-Z]|[A-Z][a-z]{0,2}[A-Z]"
# kinds a rule gives for what a name says (a value after "password:"), not for a token's own shape: a join of two
# lines never makes one of these (TOKEN_TTL=3600 and the next line's SECRET_DAYS=90 are no value of each other)
_NAMED_KINDS = ("assignment", "in prose", "in URL", "command line", "netrc", "header", "next to")


def may_be_disguised(text: str) -> bool:
    """Whether ``_spaced`` or ``_line_split`` could find anything (``memd.core.fastscan.needs_views``)."""
    if re.search(_SPACED, text) is not None:
        return True
    return any(re.search(_TOKENISH, m.group(1) + m.group(2)) for m in re.finditer(_LINE_PAIR, text))


def _rejoined(pieces: list[tuple[list[int], str]], rule_spans: RuleSpans, crossing: Callable[[str, list[int], int, int],
              bool]) -> list[tuple[str, int, int]]:
    """The rules over each joined string (all in one pass: one per line), mapped back through its offsets
    (the text's offset of each of its characters); a hit counts when ``crossing`` says so."""
    if not pieces:
        return []
    from bisect import bisect_right

    starts: list[int] = []
    n = 0
    for _, joined in pieces:
        starts.append(n)
        n += len(joined) + 1
    out: list[tuple[str, int, int]] = []
    for kind, a, b in rule_spans("\n".join(j for _, j in pieces)):
        k = bisect_right(starts, a) - 1
        offsets, joined = pieces[k]
        i, j = a - starts[k], b - starts[k]
        if j > len(joined) or not crossing(kind, offsets, i, j):
            continue
        out.append((kind, offsets[i], offsets[j - 1] + 1))
    return out


def _spaced(text: str, rule_spans: RuleSpans) -> list[tuple[str, int, int]]:
    pieces = []
    for m in re.finditer(_SPACED, text):
        run = m.group()
        pieces.append((list(range(m.start(), m.end(), 2)), run[::2]))
    return _rejoined(pieces, rule_spans, lambda kind, offsets, i, j: j - i >= 8)


def _line_split(text: str, rule_spans: RuleSpans) -> list[tuple[str, int, int]]:
    pieces = []
    for m in re.finditer(_LINE_PAIR, text):
        a, b = m.group(1), m.group(2)
        if re.search(_TOKENISH, a + b) is None:
            continue  # two words: no key
        second = m.end()
        pieces.append((list(range(m.start(1), m.end(1))) + list(range(second, second + len(b))), a + b))

    def crossing(kind: str, offsets: list[int], i: int, j: int) -> bool:
        cut = next(k for k in range(1, len(offsets)) if offsets[k] != offsets[k - 1] + 1)
        return i < cut < j and not any(w in kind for w in _NAMED_KINDS)

    return _rejoined(pieces, rule_spans, crossing)


# --------------------------------------------------------------------------- all together


def find(text: str, rule_spans: RuleSpans, depth: int = 0) -> list[Span]:
    """Every secret of text as (kind, start, end) in text's offsets, sorted, none starting inside
    another: the rules, then the detectors, over the normalised view (the text itself when plain)."""
    view = normalise(text)
    vt = view.text if view is not None else text
    longest = max(map(len, vt.split()), default=0)
    # most specific first: a later group's span starting inside one kept is dropped. The rules run
    # over the view alone when there is one: it differs from the text only where it undid a disguise.
    found = [rule_spans(vt)]
    if longest >= 16:
        found.append(_key_bodies(vt))
        if depth < MAX_DEPTH:
            found.append(_base64(vt, rule_spans, depth))
    if longest >= 40:
        found.append(_aws_secret(vt))
    if longest >= 4 and (" " in vt or "\t" in vt) and _may_have_pieces(vt):
        found.append(_split_tokens(vt, rule_spans))
    if longest >= 8:  # looks_random needs 8 characters: shorter words can hold no value next to its name
        found.append(_context(vt))
    if longest >= 2 and ("\n" in vt or " " in vt or "\t" in vt):
        found.append(_prefix_split(vt, rule_spans))
    if " " in vt or "\t" in vt:
        found.append(_spaced(vt, rule_spans))
    if longest >= 8 and "\n" in vt:
        found.append(_line_split(vt, rule_spans))
    if depth < MAX_DEPTH:
        plain = unescape(vt)
        if plain is not None:
            found.append([(k, *plain.span(a, b)) for k, a, b in find(plain.text, rule_spans, depth + 1)])
    if view is not None:
        found = [[(k, *view.span(a, b)) for k, a, b in group] for group in found]
    return merge([sorted(g, key=lambda s: (s[1], s[2])) for g in found if g])


def merge(groups: list[list[Span]]) -> list[Span]:
    """The spans of groups (each sorted by start; earlier groups first), sorted: a span that starts
    inside one already kept is not reported again, but the kept one grows to cover it (the second
    half of a split key is redacted with the first)."""
    kept: list[list[object]] = []  # [kind, start, end], sorted by start
    for group in groups:
        new: list[list[object]] = []
        j, owner = 0, -1  # owner: the index in kept of the span reaching furthest among those started
        for kind, start, end in group:
            while j < len(kept) and kept[j][1] <= start:  # type: ignore[operator]
                if owner < 0 or kept[j][2] > kept[owner][2]:  # type: ignore[operator]
                    owner = j
                j += 1
            if owner >= 0 and start < kept[owner][2]:  # type: ignore[operator]
                kept[owner][2] = max(kept[owner][2], end)  # type: ignore[call-overload]
            elif new and start < new[-1][2]:  # type: ignore[operator]
                new[-1][2] = max(new[-1][2], end)  # type: ignore[call-overload]
            else:
                new.append([kind, start, end])
        kept = sorted(kept + new, key=lambda s: s[1])  # type: ignore[arg-type,return-value]
    return [(str(k), int(a), int(b)) for k, a, b in kept]  # type: ignore[call-overload]
