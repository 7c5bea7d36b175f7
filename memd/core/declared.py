"""Declared forgetting: a model run says which memories it forgets or merges away, and why.

A model run may forget a memory on purpose: delete it (it is stale, contradicted, asked to be
forgotten) or merge it into another (a duplicate: one file absorbs the other, the entries merge).
Each is *declared*, with a reason, through the memory tool (``memd.llm.memtool``: ``delete`` with
``reason``, and the ``forget_memory`` tool of ``memd.llm.forgettool``), and recorded as a
``Forgotten`` value. The guard (``memd.core.guard.check(..., forgotten=...)``) then judges:

- an index entry (its link and the words after it) may go with the file the run forgot, and only
  with it: words dropped from an entry whose file stays, from prose, or from an entry the run did not
  touch are still refused;
- a merge keeps the absorbed file's facts: each sentence of its body is in the absorbing file after
  the run (``dropped``: every word that carries meaning, any order), unless the run declared that
  sentence stale with its reason (``Stale``);
- a memory deleted without a declaration may lose no word (``lost_words``): silent loss is refused.

Words, as these rules count them (``words``): runs of letters and digits, case folded. A sentence's
words that carry meaning (``fact_words``) leave out a few articles and prepositions, never a
negation, a number or a name. Pure: text and values in, values out.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping

from memd.core import frontmatter
from memd.core import index as mindex
from memd.core.links import link_target
from memd.record import Record

MAX_REASON_CHARS = 300
_WORD = re.compile(r"\w+")
# Words a rewording may drop without losing a fact: articles, prepositions, the copula. Never "not",
# "no", "never", a number or a name: dropping one of those changes what the sentence says.
_GLUE = frozenset(("a", "an", "the", "to", "of", "in", "on", "at", "by", "for", "with", "from", "as", "is",
                   "are", "was", "were", "be", "been", "it", "its", "this", "that", "these", "those", "and",
                   "or", "so"))
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=\S)")
_MARKS = re.compile(r"^(?:#{1,6}\s+|[-*+]\s+|\d{1,9}[.)]\s+|>\s*)+")


class Stale(Record):
    """A sentence of a merged file that the absorbing file does not carry on purpose: it is no longer true."""

    text: str
    reason: str


class Forgotten(Record):
    """A memory a run forgot: deleted (``into`` empty) or merged into ``into``, with the run's reason."""

    file: str  # folder-relative path of the memory forgotten
    reason: str
    into: str = ""  # merge: the folder-relative path of the memory that absorbed it
    stale: tuple[Stale, ...] = ()  # merge: sentences of ``file`` declared stale, each with its reason

    @property
    def merged(self) -> bool:
        return bool(self.into)

    def line(self) -> str:
        """One line for a history message or a report: "a.md merged into b.md: why" / "a.md deleted: why"."""
        what = f"{self.file} merged into {self.into}" if self.into else f"{self.file} deleted"
        out = f"{what}: {self.reason}"
        if self.stale:
            out += f" ({len(self.stale)} sentence(s) declared stale)"
        return out

    def as_dict(self) -> dict[str, object]:
        d: dict[str, object] = {"file": self.file, "action": "merged" if self.into else "deleted",
                                "reason": self.reason}
        if self.into:
            d["into"] = self.into
        if self.stale:
            d["stale"] = [{"text": s.text, "reason": s.reason} for s in self.stale]
        return d


def clean_reason(reason: object) -> str:
    """A reason as it is kept: one line, at most MAX_REASON_CHARS ("" when there is none)."""
    if not isinstance(reason, str):
        return ""
    return " ".join(reason.split())[:MAX_REASON_CHARS]


def words(text: str) -> set[str]:
    """The words of ``text`` (runs of letters and digits), case folded."""
    return {w.casefold() for w in _WORD.findall(text)}


def fact_words(sentence: str) -> set[str]:
    """The words of a sentence that carry its meaning (``words`` less a few articles and prepositions)."""
    return words(sentence) - _GLUE


def _plain(line: str) -> str:
    return " ".join(_MARKS.sub("", line.strip()).split())


def sentences(body: str) -> list[str]:
    """The sentences of a memory's body, in order: each line (list markers and heading marks dropped)
    split after ``. ! ? ;``; lines without a letter or digit (rules, fences) left out."""
    out: list[str] = []
    for line in body.splitlines():
        plain = _plain(line)
        for s in _SENTENCE_END.split(plain):
            s = s.strip()
            if any(ch.isalnum() for ch in s):
                out.append(s)
    return out


def _same(a: str, b: str) -> bool:
    """A declared stale text names a sentence: one contains the other (words compared, case folded),
    the shorter at least half of the longer, so a stray word cannot name every sentence."""
    x, y = " ".join(_WORD.findall(a.casefold())), " ".join(_WORD.findall(b.casefold()))
    if not x or not y:
        return False
    short, long_ = sorted((x, y), key=len)
    return len(short) * 2 >= len(long_) and f" {short} " in f" {long_} "


def dropped(absorbed: str, absorbing: str, stale: Iterable[Stale] = ()) -> list[str]:
    """The sentences of ``absorbed``'s body (a topic file's text) whose meaningful words are not all in
    ``absorbing`` (the absorbing file's text after the run) and that no ``stale`` entry declares."""
    body = frontmatter.parse(absorbed).body
    have = words(absorbing)
    said = [s.text for s in stale]
    return [s for s in sentences(body)
            if not fact_words(s) <= have and not any(_same(t, s) for t in said)]


def unknown_stale(absorbed: str, stale: Iterable[Stale]) -> list[str]:
    """The declared stale texts that name no sentence of ``absorbed``'s body."""
    found = sentences(frontmatter.parse(absorbed).body)
    return [s.text for s in stale if not any(_same(s.text, f) for f in found)]


def memory_words(text: str) -> set[str]:
    """What a memory says, as words: its name, description, type and body (frontmatter keys and
    bookkeeping values such as Claude Code's ``originSessionId`` are not what it says)."""
    tf = frontmatter.parse(text)
    if not tf.has_frontmatter or tf.error:
        return words(text)
    said = [tf.body]
    for key in ("name", "description", "type"):
        v = getattr(tf, key, None)
        if isinstance(v, str):
            said.append(v)
    return words("\n".join(said))


def lost_words(text: str, after: Mapping[str, bytes]) -> list[str]:
    """The words of the memory ``text`` found in no file of ``after`` (sorted)."""
    have: set[str] = set()
    for data in after.values():
        have |= words(data.decode("utf-8", "replace"))
    return sorted(memory_words(text) - have)


def entry_lines(index_text: str, files: Collection[str]) -> set[int]:
    """The 1-based lines of the index's entries that link one of ``files`` (folder-relative paths)."""
    if not files:
        return set()
    out: set[int] = set()
    for e in mindex.parse(index_text).entries:
        t, leaves = link_target(e.target, "")
        if t is not None and not leaves and t.rstrip("/") in files:
            out.add(e.line)
    return out


def effective(forgotten: Iterable[Forgotten], before: Collection[str], after: Collection[str]) -> list[Forgotten]:
    """The declarations that happened: the file was there before the run and is gone after it (a file
    declared forgotten and then written again is not forgotten). The last declaration of a file wins."""
    last: dict[str, Forgotten] = {}
    for f in forgotten:
        last[f.file] = f
    return [f for f in last.values() if f.file in before and f.file not in after]
