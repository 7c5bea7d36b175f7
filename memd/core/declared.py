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


FORGOTTEN_HEAD = "memories forgotten:"  # the block of a run's history message that lists them (``memd.apply``)


def forgotten_in(message: str) -> list[str]:
    """The lines of a run's history message that say what it forgot and why ("a.md deleted: why", "a.md
    merged into b.md: why", each ``Forgotten.line``), as ``memd.apply.run`` wrote them; [] when none."""
    _, _, rest = message.partition("\n\n" + FORGOTTEN_HEAD + "\n")
    out: list[str] = []
    for line in rest.split("\n") if rest else ():
        if not line.startswith("- "):
            break
        out.append(line[2:])
    return out


def keep_forgotten(message: str, files: Collection[str]) -> str:
    """A run's history message whose "memories forgotten:" block keeps only the lines of ``files`` (the
    deletions that landed: one skipped, its file kept, was not forgotten); without the block when none is left."""
    head, sep, rest = message.partition("\n\n" + FORGOTTEN_HEAD + "\n")
    if not sep:
        return message
    lines = rest.split("\n")
    n = next((i for i, ln in enumerate(lines) if not ln.startswith("- ")), len(lines))
    kept = [ln for ln in lines[:n] if forgotten_file(ln[2:]) in files]
    tail = "\n".join(lines[n:])
    block = sep + "\n".join(kept) if kept else ""
    return head + block + (("\n" + tail) if tail and kept else tail)


def forgotten_file(line: str) -> str:
    """The file a ``forgotten_in`` line names ("a.md deleted: ..." / "a.md merged into b.md: ...")."""
    for sep in (" merged into ", " deleted: "):
        if sep in line:
            return line.split(sep, 1)[0]
    return ""


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
    declared forgotten and then written again is not forgotten). The last declaration of a file wins; in
    the order of the files' paths."""
    last: dict[str, Forgotten] = {}
    for f in forgotten:
        last[f.file] = f
    return [f for _, f in sorted(last.items()) if f.file in before and f.file not in after]


def without_entries(index_text: str, rel: str) -> str:
    """The index without the entry lines that link ``rel`` (lines split on "\\n" only, as it is parsed)."""
    drop = entry_lines(index_text, {rel})
    if not drop:
        return index_text
    return "\n".join(ln for n, ln in enumerate(index_text.split("\n"), 1) if n not in drop)


def with_entries_of(old_index: str, now_index: str, rel: str) -> str:
    """``now_index`` with the entry lines that linked ``rel`` in ``old_index`` put back (``memd undo --file``:
    one memory comes back with its entry, the rest of the run stays). Each goes right before the nearest
    later line of ``old_index`` that ``now_index`` still has (its neighbour in the list), else right after
    the nearest earlier one, else at the end; an index that links ``rel`` already is returned as it is."""
    if entry_lines(now_index, {rel}):
        return now_index
    old = old_index.split("\n")
    wanted = sorted(entry_lines(old_index, {rel}))
    if not wanted:
        return now_index
    lines = now_index.split("\n")
    trailing = lines[-1] == "" and len(lines) > 1
    if trailing:
        lines.pop()
    for n in reversed(wanted):  # the last first: an earlier one then anchors on it
        lines.insert(_place(old, n - 1, lines), old[n - 1])
    return "\n".join(lines) + ("\n" if trailing else "")


def _place(old: list[str], k: int, lines: list[str]) -> int:
    for j in range(k + 1, len(old)):
        if old[j].strip() and old[j] in lines:
            return lines.index(old[j])
    for j in range(k - 1, -1, -1):
        if old[j].strip() and old[j] in lines:
            return len(lines) - lines[::-1].index(old[j])
    return len(lines)
