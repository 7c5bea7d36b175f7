"""Evidence for the dream, computed locally (pure; issue 31): what in a memory folder may be duplicated,
out of date or unused, so the model is shown where to look instead of having to read every file.

- ``near_duplicates``: pairs of topic files that say much the same, by their description and body. Each
  file becomes a bag of content words and word pairs weighted by TF-IDF; the pairs are found through an
  inverted index whose postings are capped (a term in more than ``max_postings`` files says nothing about
  any two of them), so the work is linear in the folder's words, never quadratic in its files. A pair is
  a candidate when its cosine is high, or when most of the smaller file's weight is in the larger one
  (a short memory repeated inside a longer one whose description is vague: cosine alone misses it).
- ``passed_dates``: a memory stating that something holds until (or by, before, through ...) a date that
  has passed: "Merge freeze for the mobile release until 2026-01-15".
- ``past_cut``: index entries Claude Code never loads (past its line or character cut).
- ``never_used``: topic files no session read, recalled or wrote while the index was loaded ``n`` times.

Candidates are evidence for a model to weigh, never decisions: nothing here deletes or merges anything.
The core reads no clock: ``today`` is given (an ISO date).
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

from memd.core import index
from memd.record import Record, field

# Words that carry no topic (English; a memory folder in another language is matched by its own words).
_STOP_WORDS = """
a about above after again against all also am an and any are as at be because been before being below between
both but by can could did do does doing down during each few for from further had has have having he her here
hers him his how i if in into is it its itself just me more most my no nor not now of off on once only or other
our ours out over own same she should so some such than that the their theirs them then there these they this
those through to too under until up very was we were what when where which while who whom why will with would
you your yours use used uses using always never every note notes memory memories user users project session
"""
_STOP = frozenset(_STOP_WORDS.split())
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


class Doc(Record):
    """One topic file as the evidence sees it: its path, its description and its body."""

    rel: str
    description: str
    body: str


class Pair(Record):
    """Two topic files that may be duplicates: ``score`` in [0, 1] and the words they share most."""

    a: str
    b: str
    score: float
    shared: tuple[str, ...] = ()


class DatedMemory(Record):
    """A memory stating that something holds until a date that has passed (``phrase``: its words)."""

    rel: str
    date: str  # ISO (YYYY-MM-DD)
    phrase: str


class Use(Record):
    """What the transcripts say of one topic file (running counts, ``memd.state``)."""

    reads: int = 0
    recalls: int = 0
    writes: int = 0
    weak: int = 0  # a Bash cat/grep over the folder naming it: a weak signal, never counted as a read
    last_seen: float | None = None  # the last read, recall or write

    @property
    def used(self) -> int:
        return self.reads + self.recalls + self.writes


class Candidates(Record):
    """All the evidence for one folder."""

    pairs: list[Pair] = field(default_factory=list)
    dated: list[DatedMemory] = field(default_factory=list)
    past_cut: list[index.Entry] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.pairs) + len(self.dated) + len(self.past_cut) + len(self.unused)


# ----------------------------------------------------------------------------- near duplicates


_STEMS: dict[str, str] = {}  # word -> its key (stop words -> ""): words repeat across a folder


def _key(w: str) -> str:
    k = _STEMS.get(w)
    if k is None:
        low = w.lower()
        if len(low) > 4 and low.endswith("ies"):
            k = low[:-3] + "y"
        elif len(low) > 3 and low.endswith("s") and not low.endswith("ss"):
            k = low[:-1]
        else:
            k = low
        if k in _STOP or len(k) < 2:
            k = ""
        if len(_STEMS) < 200_000:
            _STEMS[w] = k
    return k


_TOKEN = re.compile(r"[^\W_]+(?:['’][^\W_]+)?|\n")


def _unfenced(text: str) -> str:
    if "```" not in text and "~~~" not in text:
        return text
    keep: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if m:
            mark = m.group(1)
            fence = (mark[0] * len(mark)) if fence is None else (None if mark.startswith(fence) else fence)
        elif fence is None:
            keep.append(line)
    return "\n".join(keep)


def terms(text: str) -> Counter[str]:
    """The content words of ``text`` (lower-cased, stop words out, a plural's ``s`` off) and each pair of
    neighbouring content words on a line, counted. Code fences are skipped: a shared snippet is not a
    shared fact."""
    words: list[str] = []
    for tok in _TOKEN.findall(_unfenced(text)):
        k = "\n" if tok == "\n" else _key(tok)
        if k:
            words.append(k)
    out: Counter[str] = Counter(w for w in words if w != "\n")
    out.update(f"{a} {b}" for a, b in itertools.pairwise(words) if a != "\n" and b != "\n")  # within a line
    return out


def near_duplicates(docs: Sequence[Doc], *, min_cosine: float = 0.35, min_containment: float = 0.45,
                    min_shared: int = 3, max_postings: int = 64, max_pairs: int = 12) -> list[Pair]:
    """Pairs of ``docs`` that may say the same (see the module doc), the likeliest first, at most
    ``max_pairs``. A pair's ``shared`` names the words that weigh most on both sides."""
    bags = [terms(f"{d.description}\n{d.description}\n{d.body}") for d in docs]  # the description counts twice
    n = len(docs)
    if n < 2:
        return []
    df: Counter[str] = Counter()
    for bag in bags:
        df.update(bag.keys())
    vecs: list[dict[str, float]] = []
    norms: list[float] = []
    totals: list[float] = []
    idf = {c: 1.0 + math.log(n / c) for c in set(df.values())}
    tfw = {c: 1.0 + math.log(c) for bag in bags for c in set(bag.values())}
    for bag in bags:
        v = {t: tfw[c] * idf[df[t]] for t, c in bag.items()}
        vecs.append(v)
        norms.append(math.sqrt(sum(w * w for w in v.values())) or 1.0)
        totals.append(sum(v.values()) or 1.0)
    postings: dict[str, list[int]] = {t: [] for t, c in df.items() if 2 <= c <= max_postings}
    for i, v in enumerate(vecs):
        for t in v.keys() & postings.keys():
            postings[t].append(i)
    dot: dict[tuple[int, int], float] = defaultdict(float)
    overlap: dict[tuple[int, int], float] = defaultdict(float)
    hits: Counter[tuple[int, int]] = Counter()
    for t, ids in postings.items():
        for x in range(len(ids)):
            i = ids[x]
            wi = vecs[i][t]
            for y in range(x + 1, len(ids)):
                j = ids[y]
                wj = vecs[j][t]
                dot[(i, j)] += wi * wj
                overlap[(i, j)] += min(wi, wj)
                if " " not in t:
                    hits[(i, j)] += 1
    found: list[tuple[float, int, int]] = []
    for (i, j), d in dot.items():
        cos = d / (norms[i] * norms[j])
        contain = overlap[(i, j)] / min(totals[i], totals[j])
        small = min(len(bags[i]), len(bags[j]))
        if cos >= min_cosine or (contain >= min_containment and hits[(i, j)] >= min_shared and small >= 2 * min_shared):
            found.append((max(cos, contain), i, j))
    found.sort(key=lambda f: (-f[0], docs[f[1]].rel, docs[f[2]].rel))
    out: list[Pair] = []
    for score, i, j in found[:max_pairs]:
        common = sorted((t for t in vecs[i] if t in vecs[j] and " " not in t),
                        key=lambda t: (-min(vecs[i][t], vecs[j][t]), -len(t), t))[:6]
        a, b = sorted((docs[i].rel, docs[j].rel))
        out.append(Pair(a, b, round(min(score, 1.0), 2), tuple(common)))
    return out


# ----------------------------------------------------------------------------- dates that passed

_MONTHS = {m: i for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                       "nov", "dec"), 1)}
_DATE = (r"(?P<iso>(?<!\d)\d{4}[-/]\d{1,2}[-/]\d{1,2}(?!\d))"
         r"|(?P<mdy>\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d{1,2}(?:st|nd|rd|th)?,?\s+\d{4}\b)"
         r"|(?P<dmy>\b\d{1,2}(?:st|nd|rd|th)?\s+(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?,?\s+\d{4}\b)")
# a word that makes the date a limit (the state holds until then, or must be done by then), then at most
# a few words before the date: "until 2026-01-15", "freeze through Jan 15, 2026", "deadline: 2026-03-01"
# A limit word, then the date it limits. A state word (a freeze, a block, a pause) counts only with a limit word
# after it: "Deploy Blocked (2026-03-15)" names the day a block began, not a deadline (real data).
_LIMIT_WORDS = (r"(?:until|till|til|through|thru|by|before|deadline|due|expires?|expiring|expiry|ends?|ending|"
                r"valid\s+to|no\s+later\s+than)")
_LIMIT = re.compile(r"\b(?:(?:freeze|frozen|blocked|paused|temporar(?:y|ily))\b[^.\n;]{0,40}?\b)?" + _LIMIT_WORDS
                    + r"\b[^.\n;]{0,40}?(?:" + _DATE + ")", re.I)


_YEAR = re.compile(r"\d{4}")
_RANGE_START = re.compile(r"(?:" + _DATE + r")[\s,)]*$", re.I)


def _iso(m: re.Match[str]) -> str | None:
    try:
        if m.group("iso"):
            y, mo, d = (int(x) for x in re.split(r"[-/]", m.group("iso")))
        else:
            text = (m.group("mdy") or m.group("dmy") or "").lower().replace(",", " ").replace(".", " ")
            parts = text.split()
            y = int(parts[-1])
            if m.group("mdy"):
                mo, d = _MONTHS[parts[0][:3]], int(re.sub(r"\D", "", parts[1]))
            else:
                d, mo = int(re.sub(r"\D", "", parts[0])), _MONTHS[parts[1][:3]]
    except (KeyError, ValueError, IndexError):
        return None
    if not (1 <= mo <= 12 and 1 <= d <= 31 and 1900 < y < 3000):
        return None
    return f"{y:04d}-{mo:02d}-{d:02d}"


def passed_dates(doc: Doc, today: str) -> list[DatedMemory]:
    """The limits ``doc`` states (its description, then its body; fenced code aside) that lie before
    ``today`` (YYYY-MM-DD), one per date."""
    out: list[DatedMemory] = []
    seen: set[str] = set()
    fence: str | None = None
    for line in [doc.description, *doc.body.split("\n")]:
        m = _FENCE.match(line)
        if m:
            mark = m.group(1)
            fence = (mark[0] * len(mark)) if fence is None else (None if mark.startswith(fence) else fence)
            continue
        if fence is not None or not _YEAR.search(line):
            continue  # most lines state no year: the costly pattern is not tried on them
        for hit in _LIMIT.finditer(line):
            if hit.group(0)[:4].lower() in ("thro", "thru") and _RANGE_START.search(line[:hit.start()]):
                continue  # "2026-03-21 through 2026-03-23": a span of days, not a limit
            day = _iso(hit)
            if day is None or day >= today or day in seen:
                continue
            seen.add(day)
            out.append(DatedMemory(doc.rel, day, " ".join(hit.group(0).split())[:80]))
    return out


# ----------------------------------------------------------------------------- the index and use


def past_cut(index_text: str, max_lines: int, max_chars: int) -> list[index.Entry]:
    """The index entries past Claude Code's cut (never loaded)."""
    return list(index.measure(index_text, max_lines, max_chars).hidden)


def never_used(uses: Mapping[str, Use], born: Mapping[str, float], loads: Sequence[float], n: int) -> list[str]:
    """The topic files (keys of ``born``: rel -> the time the file was last written) that no session read,
    recalled or wrote since the ``n``-th newest index load (``loads``: the times sessions loaded the index),
    among files that existed before it. Empty with fewer than ``n`` loads: too little evidence."""
    if n <= 0 or len(loads) < n:
        return []
    since = sorted(loads, reverse=True)[n - 1]
    out = []
    for rel, t in born.items():
        u = uses.get(rel)
        if t < since and (u is None or u.last_seen is None or u.last_seen < since):
            out.append(rel)
    return sorted(out)


def least_used(rels: Iterable[str], uses: Mapping[str, Use]) -> list[str]:
    """``rels`` ordered least used first (fewest reads, recalls and writes, then seen longest ago)."""
    def key(rel: str) -> tuple[int, float, str]:
        u = uses.get(rel) or Use()
        return (u.used, u.last_seen or 0.0, rel)

    return sorted(rels, key=key)
