"""``memd.core.secrets.scan``, fast enough to run over a thousand memory folders.

Each rule's regex source says two things about every match, read once per process: how long a
whitespace-free run it holds (``solid_length``: an AWS key is 20 characters without a space) and
its "needles", literal strings it must contain (``pattern_needles``; a rule added to secret_rules.py
gets both, or, when its shape is not plain enough, simply always runs). A text first rules out
every rule whose run is longer than the text's longest one (prose rules out most), then every
rule missing a needle (a few ``in`` tests, the one-needle sets first, each needle tested once per
text); a regex that starts with ``\\b`` gets no literal-prefix speed-up from the re module, so
this makes scanning prose about ten times cheaper. Only the rules left are compiled (on first
use, kept for the process) and run. The hits are exactly those of ``secrets.scan_all`` (tests compare
the two, on samples and on strings generated from every rule).
"""

from __future__ import annotations

import re
from itertools import pairwise

from memd.core import secret_rules
from memd.core.secret_rules import SecretHit, Span

Needles = tuple[frozenset[str], ...]  # every set must have a member in the text (AND of ORs)

_CLASS_ESCAPES = frozenset("dDwWsSbBAZ")  # one-character escapes that stand for a class or a position
_QUANT = "?*{"  # after a literal: that literal may be absent (or repeated a number of times that may be 0)
MAX_PRODUCT = 64  # literal alternatives combined with their neighbours before giving up on the product


def fold(text: str) -> str:
    folded = text.casefold()
    # dotless i: re's IGNORECASE matches it with "i", and casefold keeps it
    return folded.replace("\u0131", "i") if "\u0131" in folded else folded


def _level(p: str, start: int) -> tuple[list[int], int]:
    """Walk p from start, skipping escapes, character classes and nested groups: (the indexes of
    the "|" at start's own level, the index of the ")" that closes that level, or -1)."""
    bars: list[int] = []
    depth, j = 0, start
    while j < len(p):
        ch = p[j]
        if ch == "\\":
            j += 2
            continue
        if ch == "[":
            j = _class_end(p, j)
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                return bars, j
            depth -= 1
        elif ch == "|" and depth == 0:
            bars.append(j)
        j += 1
    return bars, -1


def _group_end(p: str, i: int) -> int:
    """Index just past the group that opens at p[i], or -1."""
    close = _level(p, i + 1)[1]
    return close + 1 if close >= 0 else -1


def _class_end(p: str, i: int) -> int:
    """Index just past the character class that opens at p[i]."""
    j = i + 1
    if j < len(p) and p[j] == "^":
        j += 1
    if j < len(p) and p[j] == "]":
        j += 1  # a "]" first in a class is a literal
    while j < len(p) and p[j] != "]":
        j += 2 if p[j] == "\\" else 1
    return j + 1


def _split_alternatives(body: str) -> list[str]:
    """body split at its top-level "|" (a balanced pattern, as a valid regex's is)."""
    cuts = [-1, *_level(body, 0)[0], len(body)]
    return [body[a + 1:b] for a, b in pairwise(cuts)]


def _literal_prefix(p: str) -> tuple[str, bool]:
    """(the literal text p starts with, whether p is nothing but that text)."""
    out: list[str] = []
    i = 0
    while i < len(p):
        ch = p[i]
        if ch == "\\" and i + 1 < len(p) and not p[i + 1].isalnum():
            out.append(p[i + 1])
            i += 2
        elif ch in ".^$*+?{}[]\\|()":
            break
        else:
            out.append(ch)
            i += 1
        if i < len(p) and p[i] in _QUANT:
            out.pop()
            return "".join(out), False
    return "".join(out), i == len(p)


def _sequence(p: str) -> list[frozenset[str]] | None:
    """Needle sets of one alternative-free sequence, each required on its own; None if unreadable."""
    cands: list[frozenset[str]] = []
    run = [""]

    def close() -> None:
        nonlocal run
        if all(run):
            cands.append(frozenset(run))
        run = [""]

    def literal(ch: str, after: int) -> None:
        nonlocal run
        run = [r + ch for r in run]
        if after < len(p) and p[after] in _QUANT:
            run = [r[:-1] for r in run]
            close()

    i = 0
    while i < len(p):
        ch = p[i]
        if ch == "\\":
            if i + 1 < len(p) and not p[i + 1].isalnum():
                literal(p[i + 1], i + 2)
            elif i + 1 < len(p) and p[i + 1] in _CLASS_ESCAPES:
                close()  # \b, \d, \s...: not literal text
            else:
                return None  # \x41, \u00e9, \1...: longer escapes are not read here
            i += 2
        elif ch == "(":
            end = _group_end(p, i)
            if end < 0:
                return None
            optional = end < len(p) and p[end] in _QUANT
            if p.startswith(("(?:", "(?>"), i) and not optional:  # non-capturing or atomic: same literals
                alts = [_literal_prefix(a) for a in _split_alternatives(p[i + 3:end - 1])]
                if len(run) * len(alts) > MAX_PRODUCT:
                    close()
                run = [r + a for r in run for a, _ in alts]
                if not all(whole for _, whole in alts):
                    close()  # some alternative goes on with more than literal text
            else:
                close()  # optional, capturing, lookaround or flagged groups: skipped
            i = end
        elif ch == "[":
            close()
            i = _class_end(p, i)
        elif ch == "{":
            close()
            j = p.find("}", i)
            i = j + 1 if j > 0 else len(p)
        elif ch in ".^$?*+)":
            close()
            i += 1
        elif ch == "|":
            return None
        else:
            literal(ch, i + 1)
            i += 1
    close()
    return cands


def _common(needle: str) -> bool:
    return len(needle) < 2 and (needle.isalnum() or needle in " .,-:;\n")


def _score(s: frozenset[str]) -> tuple[int, int]:
    return (min(map(len, s)), -len(s))


def pattern_needles(pattern: str, flags: int = 0) -> Needles | None:
    """Needles of a regex: sets of literals, each set holding a string every match contains.
    None when nothing reliable can be read (the rule must then always run)."""
    if flags & re.VERBOSE:
        return None
    body = pattern
    m = re.match(r"\(\?[aiLmsux]+\)", body)
    if m:
        body = body[m.end():]
    alts = _split_alternatives(body)
    if len(alts) > 1:
        union: set[str] = set()
        for a in alts:
            c = _sequence(a)
            if not c:
                return None
            best: frozenset[str] = max(c, key=_score)
            union.update(best)
        needles: Needles = (frozenset(union),)
    else:
        c = _sequence(body)
        if not c:
            return None
        needles = tuple(sorted(c, key=_score, reverse=True)[:3])
    if flags & re.IGNORECASE:
        needles = tuple(frozenset(fold(n) for n in s) for s in needles)
    needles = tuple(s for s in needles if not all(_common(n) for n in s))  # "." is everywhere: no test
    return needles or None


_QUANT_RX = re.compile(r"\?|\*|\+|\{(\d*)(?:,\d*)?\}")


def _class_is_solid(body: str) -> bool:
    """True when the character class (its text between the brackets) can never match whitespace."""
    negated = body.startswith("^")
    if negated:
        return "\\s" in body  # [^\s...]: everything but whitespace (and more)
    if "\\s" in body or " " in body or "\\t" in body or "\\n" in body or "\\r" in body or "\\f" in body \
            or "\\v" in body or "\\W" in body or "\\D" in body or "\\S" in body or "\\x" in body \
            or "\\u" in body or "\\N" in body or "\\p" in body:
        return False
    i = 0
    while i < len(body):  # a range spanning a whitespace character (" -~") could match one
        if body[i] == "\\":
            i += 2
            continue
        if i + 2 < len(body) and body[i + 1] == "-" and body[i] <= " " <= body[i + 2]:
            return False
        if not body[i].isprintable() or body[i].isspace():
            return False
        i += 1
    return True


def solid_length(pattern: str, flags: int = 0) -> int:
    """The length of whitespace-free text every match must contain (0 when unknown): a match of
    ``\\b[MN][A-Za-z\\d]{23,25}\\.[\\w-]{6}\\.[\\w-]{27,38}`` holds a 58-character token."""
    if flags & re.VERBOSE:
        return 0
    p = pattern
    m = re.match(r"\(\?[aiLmsux]+\)", p)
    i = m.end() if m else 0
    best = cur = 0
    while i < len(p):
        ch = p[i]
        solid: bool
        if ch == "|":
            return 0
        if ch == "\\":
            nxt = p[i + 1] if i + 1 < len(p) else ""
            i += 2
            if nxt in ("b", "B", "A", "Z"):
                continue  # zero-width
            if nxt.isalnum() and nxt not in _CLASS_ESCAPES:
                return 0  # \x41, \u00e9, \1...: longer escapes are not read here
            solid = nxt in ("d", "w") or (not nxt.isalnum() and not nxt.isspace())
        elif ch == "[":
            end = _class_end(p, i)
            solid = _class_is_solid(p[i + 1:end - 1])
            i = end
        elif ch == "(":
            end = _group_end(p, i)
            if end < 0:
                return 0
            i = end
            solid = False  # groups are not looked into
        elif ch in "^$":
            i += 1
            continue
        elif ch in ".)":
            i += 1
            solid = False
        else:
            i += 1
            solid = not ch.isspace() and ch not in "?*+{}"
        q = _QUANT_RX.match(p, i)
        count = 1
        if q:
            i = q.end()
            if q.group(0) in ("?", "*"):
                count = 0
            elif q.group(0).startswith("{"):
                count = int(q.group(1) or 0)
            if i < len(p) and p[i] in "?+":
                i += 1  # lazy or possessive
        if solid:
            cur += count
            best = max(best, cur)
        else:
            cur = 0
    return best


class Rule:
    """One secret rule with what its regex's source says about every match; the regex itself is
    compiled on first use (most rules never run on a given folder)."""

    __slots__ = ("_needles", "flags", "folded", "kind", "pattern", "solid")

    def __init__(self, kind: str, pattern: str) -> None:
        self.kind = kind
        self.pattern = pattern
        self.flags = _inline_flags(pattern)
        self.folded = bool(self.flags & re.IGNORECASE)  # needles are tested against the case-folded text
        self.solid = solid_length(pattern, self.flags)  # every match holds a whitespace-free run this long
        self._needles: Needles | bool | None = False  # read on first use: most texts rule a rule out by solid

    @property
    def needles(self) -> Needles | None:
        got = self._needles
        if got is False:
            got = pattern_needles(self.pattern, self.flags)
            if got is not None:  # one-needle sets first: one test can rule the rule out ("=" for .env lines)
                got = tuple(sorted(got, key=lambda alts: len(alts) > 1))
            self._needles = got
        assert got is not True
        return got

    @property
    def rx(self) -> re.Pattern[str]:
        return secret_rules.compiled(self.pattern)


_FLAG_LETTERS = {"a": re.ASCII, "i": re.IGNORECASE, "L": re.LOCALE, "m": re.MULTILINE, "s": re.DOTALL,
                 "u": re.UNICODE, "x": re.VERBOSE}


def _inline_flags(pattern: str) -> int:
    """The flags a pattern sets for itself with a leading ``(?imx)`` (the rules use no others)."""
    m = re.match(r"\(\?([aiLmsux]+)\)", pattern)
    out = 0
    for ch in m.group(1) if m else "":
        out |= _FLAG_LETTERS[ch]
    return out


_BY_PATTERN: dict[tuple[str, str], Rule] = {}


def _rule(kind: str, pattern: str) -> Rule:
    got = _BY_PATTERN.get((kind, pattern))
    if got is None:
        got = _BY_PATTERN[(kind, pattern)] = Rule(kind, pattern)
    return got


class RuleSet:
    """Rules in their order, grouped by how long a whitespace-free run each needs."""

    __slots__ = ("_eligible", "rules")

    def __init__(self, rules: tuple[Rule, ...]) -> None:
        self.rules = rules
        self._eligible: dict[int, tuple[Rule, ...]] = {}

    def eligible(self, longest: int) -> tuple[Rule, ...]:
        """The rules (in order) whose matches fit in a text whose longest whitespace-free run is longest."""
        got = self._eligible.get(longest)
        if got is None:
            got = self._eligible[longest] = tuple(r for r in self.rules if r.solid <= longest)
        return got


_PREPARED: dict[tuple[int, bool], RuleSet] = {}


def ruleset(strict: bool = False, pii: bool = True) -> RuleSet:
    specs = secret_rules.specs(strict, pii)
    key = (len(specs), strict and pii)
    got = _PREPARED.get(key)
    if got is None:
        got = _PREPARED[key] = RuleSet(tuple(_rule(kind, p) for kind, p in specs))
    return got


def active(rs: RuleSet, text: str) -> list[Rule]:
    """The rules of rs that can match text, in their order: those whose whitespace-free run fits in
    the text's longest one and whose needles the text holds."""
    longest = max(map(len, text.split()), default=0)
    out: list[Rule] = []
    seen: dict[str, bool] = {}  # needle -> in the text (folded needles are keyed with a leading NUL)
    low: str | None = None
    for r in rs.eligible(longest):
        needles = r.needles
        if needles is None:
            out.append(r)
            continue
        if r.folded:
            if low is None:
                low = fold(text)
            hay, mark = low, "\0"
        else:
            hay, mark = text, ""
        for alts in needles:
            for n in alts:
                k = mark + n
                hit = seen.get(k)
                if hit is None:
                    hit = seen[k] = n in hay
                if hit:
                    break
            else:
                break  # no needle of this set: the rule cannot match
        else:
            out.append(r)
    return out


def rule_spans(text: str, *, strict: bool = False, pii: bool = True) -> list[Span]:
    """The matches of the rules (only those text can match) as (kind, start, end)."""
    return secret_rules.collect_spans(text, ((rule.kind, rule.rx) for rule in active(ruleset(strict, pii), text)))


def spans(text: str, *, strict: bool = False, pii: bool = True) -> list[Span]:
    """Every secret of text: the rules through this module, with ``memd.core.secret_views``'s views
    and detectors (``secrets.spans`` is this)."""
    from memd.core import secret_views

    return secret_views.find(text, lambda t: rule_spans(t, strict=strict, pii=pii))


def scan(text: str, *, strict: bool = False, pii: bool = True) -> list[SecretHit]:
    """Exactly ``secrets.scan_all(text, strict=strict, pii=pii)``, faster (``secrets.scan`` is this)."""
    return secret_rules.hits_of(text, spans(text, strict=strict, pii=pii))


def scan_many(texts: list[str], *, strict: bool = False, pii: bool = True) -> list[list[SecretHit]]:
    return [scan(t, strict=strict, pii=pii) for t in texts]
