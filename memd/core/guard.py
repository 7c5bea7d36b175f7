"""The guard: may a model run's result replace the memory folder? Pure policy, no I/O.

``check(before, after, limits)`` takes the folder as it was staged and as the run left it (file
maps: folder-relative path -> bytes) and plain budget values, and returns the verdict and every
reason. A run is rejected whole when any rule fails:

- team/ changed (it is synced from a server: read-only);
- a written file is not UTF-8, its frontmatter does not parse, a topic file that had frontmatter
  (or a new one) has none, a new topic file's type is not a memory type;
- a secret was written (more hits of a kind than the file had before);
- the index is over its budget and the run made it worse (or it was not over before); the index
  was deleted; it links a file the run deleted, a missing file, or outside the folder (links the
  index already had, to something already missing, are not the run's doing);
- the index loses the user's own text: a line of it that is not an entry (a heading, a note, a rule
  written straight into MEMORY.md) is found after the run neither in the new index nor in a topic
  file, list markers, heading marks and whitespace aside (the run may move such text into a topic
  file and link it, never drop it: ``lost_prose``), unless the user removed that line themselves
  (``removed_by_user``: a sync carrying another machine's correction);
- the index loses the words after an entry's link that were the user's: words no topic file held
  before the run (the linked file's description taken out of the hook first, so a note appended to a
  description counts) and that are found after the run in no file (``lost_notes``). A hook that only
  repeats a description may go with its entry (a merge); a note the user wrote may not, except with
  the file a model run declared forgotten or merged away (below);
- (a model run, ``forgotten`` given: ``forget_reasons``, ``memd.core.declared``) the run may forget a
  memory on purpose, with a reason: its index entries (link and words after it) are released from the
  notes rule with it, and only they. A merge whose absorbing file does not hold each sentence of the
  absorbed one (its meaningful words) is rejected unless the run declared that sentence stale with its
  reason; a memory the run deletes without declaring it may lose no word (silent loss);
- the run deletes every memory, or more than ``max_delete_share`` of them (one is always allowed);
- a memory emptied, stripped of its name or description, or the memories' body text shrunk by
  more than ``max_shrink_share`` (and more than ``min_shrink_chars``);
- a change whose target lies, in the live folder, behind a symlink or outside it;
- (a model run, ``resolved`` given: ``block_reasons``) a sync conflict block (``memd.core.conflict``)
  left half-removed (a start marker without its end, or the reverse), kept with its lines edited
  (or merged with another block), removed without the run saying
  what it decided, or whose lines are found after the run in no file while the run did not resolve
  it: a block's words may go only with the run's decision about that block. Conflict markers are
  memd's lines, never the user's prose; the lines of an index block the run resolved are released
  from the prose and notes rules.

What only the live folder can tell is handed in as values by the caller (``memd.apply``):
``live_problems`` (path -> why it may not be written there) and ``live_exists`` (the non-markdown
paths that exist, confined, in the live folder: staging holds only ``*.md``). Golden cases:
``tests/golden/guard/``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING

from memd.core import conflict as cblock
from memd.core import declared, frontmatter, secrets
from memd.core import index as mindex
from memd.core.links import fold_path, link_target
from memd.core.paths import INDEX_NAME, is_team, is_topic
from memd.record import Record

if TYPE_CHECKING:
    from typing import Literal

    Verdict = Literal["pass", "reject"]

PASS: Verdict = "pass"
REJECT: Verdict = "reject"


class GuardLimits(Record):
    """The budget values the guard needs (``memd.config`` builds them; the core never reads config)."""

    max_lines: int = 200
    max_chars: int = 25_000
    warn_ratio: float = 0.8
    max_delete_share: float = 0.25
    max_shrink_share: float = 0.5
    # Tidying two short duplicates may cut half of a tiny folder: a shrink under this many
    # characters is always allowed.
    min_shrink_chars: int = 200


class GuardResult(Record):
    verdict: Verdict
    reasons: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return self.verdict == PASS


class Change(Record):
    rel: str
    kind: str  # "added", "changed" or "deleted"
    before: bytes | None
    after: bytes | None


def diff(before: Mapping[str, bytes], after: Mapping[str, bytes]) -> list[Change]:
    """What ``after`` changed against ``before``, sorted by path."""
    out: list[Change] = []
    for rel in sorted(set(after) | set(before)):
        b, a = before.get(rel), after.get(rel)
        if b is None and a is not None:
            out.append(Change(rel, "added", None, a))
        elif b is not None and a is None:
            out.append(Change(rel, "deleted", b, None))
        elif b is not None and a is not None and a != b:
            out.append(Change(rel, "changed", b, a))
    return out


def link_targets(index_text: str) -> list[str]:
    """The in-folder targets an index links (URLs and links leaving the folder left out)."""
    out: list[str] = []
    for e in mindex.parse(index_text).entries:
        t, leaves = link_target(e.target, "")
        if t is not None and not leaves and t.rstrip("/") not in ("", "."):
            out.append(t.rstrip("/"))
    return out


def check(before: Mapping[str, bytes], after: Mapping[str, bytes], limits: GuardLimits, *,
          live_problems: Mapping[str, str] | None = None,
          live_exists: Collection[str] = (), removed_by_user: Collection[str] = (),
          resolved: Collection[cblock.Resolution] | None = None,
          forgotten: Collection[declared.Forgotten] | None = None) -> GuardResult:
    """Every reason ``after`` may not replace ``before`` (see the module doc). ``resolved``: the
    conflict blocks a model run resolved, with its decisions (None: a writer whose changes are the
    user's own, such as a sync, whose blocks are not judged). ``forgotten``: the memories a model run
    declared forgotten or merged, with its reasons (``memd.core.declared``; None: a writer whose
    deletions are not judged for silent loss)."""
    chs = diff(before, after)
    parsed = _Parsed()
    reasons: list[str] = []
    reasons += [f"{c.rel}: team/ memory changed (it is read-only)" for c in chs if is_team(c.rel)]
    for c in chs:
        if c.after is not None and not is_team(c.rel):
            reasons += _file_reasons(c, parsed)
    idx = after.get(INDEX_NAME)
    if idx is not None:
        text = idx.decode("utf-8", "replace")
        reasons += budget_reasons(text, before.get(INDEX_NAME), limits)
        reasons += _link_reasons(before, after, text, live_exists)
    elif INDEX_NAME in before:
        reasons.append("MEMORY.md was deleted")
    released = _released_lines(before.get(INDEX_NAME), resolved or ())
    if forgotten is not None:
        gone = declared.effective(forgotten, _topics(before), after)
        old = before.get(INDEX_NAME)
        if old is not None:  # an entry goes with the file the run forgot, and only with it
            released |= declared.entry_lines(old.decode("utf-8", "replace"), {f.file for f in gone})
        reasons += forget_reasons(before, after, gone)
    reasons += _prose_reasons(before.get(INDEX_NAME), after, before, removed_by_user, released)
    if resolved is not None:
        reasons += block_reasons(before, after, resolved)
    reasons += _deletion_reasons(before, after, limits)
    reasons += _content_reasons(chs, before, after, limits, parsed)
    problems = live_problems or {}
    reasons += [f"{c.rel}: {problems[c.rel]} in the memory folder (memd never writes through one)"
                for c in chs if not is_team(c.rel) and c.rel in problems]
    return GuardResult(REJECT if reasons else PASS, tuple(reasons))


class _Parsed:
    """Each file is parsed once though several rules look at it, before and after."""

    def __init__(self) -> None:
        self._memo: dict[bytes, frontmatter.TopicFile] = {}

    def __call__(self, data: bytes) -> frontmatter.TopicFile:
        tf = self._memo.get(data)
        if tf is None:
            tf = self._memo[data] = frontmatter.parse(data.decode("utf-8", "replace"))
        return tf


def _file_reasons(c: Change, parsed: Callable[[bytes], frontmatter.TopicFile]) -> list[str]:
    assert c.after is not None
    try:
        c.after.decode("utf-8")
    except UnicodeDecodeError:
        return [f"{c.rel}: not valid UTF-8"]
    out: list[str] = []
    if c.rel != INDEX_NAME:
        tf = parsed(c.after)
        had = c.before is not None and parsed(c.before).has_frontmatter
        if tf.error:
            out.append(f"{c.rel}: frontmatter does not parse ({tf.error[:80]})")
        elif (c.kind == "added" or had) and not tf.has_frontmatter:
            out.append(f"{c.rel}: has no frontmatter")
        elif c.kind == "added" and tf.type not in frontmatter.MEMORY_TYPES:
            out.append(f"{c.rel}: type is not one of {', '.join(frontmatter.MEMORY_TYPES)}")
    before_hits = _secret_kinds(c.before)
    for kind, n in _secret_kinds(c.after).items():
        if n > before_hits.get(kind, 0):
            out.append(f"{c.rel}: a secret was written ({kind})")
    return out


def _secret_kinds(data: bytes | None) -> dict[str, int]:
    if data is None:
        return {}
    out: dict[str, int] = {}
    for h in secrets.scan(data.decode("utf-8", "replace")):
        out[h.kind] = out.get(h.kind, 0) + 1
    return out


def budget_reasons(text: str, old: bytes | None, limits: GuardLimits) -> list[str]:
    """An index that was over its budget before the run may stay over as long as the run does not
    make it longer (nothing newly pushed past the cut); anything else over the budget is rejected.
    (``memd.apply.finalize`` plans its index repair to pass this rule when it can.)"""
    b = limits
    budget = mindex.measure(text, b.max_lines, b.max_chars, b.warn_ratio)
    if budget.level != "over":
        return []
    was = mindex.measure(old.decode("utf-8", "replace"), b.max_lines, b.max_chars, b.warn_ratio) \
        if old is not None else None
    if was is None or was.level != "over" or budget.lines > was.lines or budget.chars > was.chars:
        return [f"MEMORY.md is over its budget ({budget.lines} lines, {budget.chars} characters)"]
    return []


def _link_reasons(before: Mapping[str, bytes], after: Mapping[str, bytes], text: str,
                  live_exists: Collection[str]) -> list[str]:
    """Links of the new index that the run leaves pointing nowhere.

    Staging holds only ``*.md`` files, so a link to anything else (a picture, a sub-folder without
    markdown) is live when it exists in the live folder (``live_exists``). A link the index already
    had before the run, to something already missing, is not the run's doing (the rebuild leaves
    non-.md links alone): it does not reject the run. A link the run deleted the target of, or a new
    link to nowhere or out of the folder, does."""
    old = before.get(INDEX_NAME)
    old_links: set[str] = set()
    if old is not None:
        for e in mindex.parse(old.decode("utf-8", "replace")).entries:
            t, _ = link_target(e.target, "")
            if t is not None:
                old_links.add(t.rstrip("/"))
    folded = {fold_path(r) for r in after}
    out: list[str] = []
    for e in mindex.parse(text).entries:
        target, leaves = link_target(e.target, "")
        if target is None:
            continue  # a URL
        t = target.rstrip("/")
        if t in ("", "."):
            continue  # the memory folder itself
        if leaves:
            if t not in old_links:
                out.append(f"MEMORY.md links outside the memory folder ({target[:80]})")
            continue
        if t in after or fold_path(t) in folded or any(k.startswith(t + "/") for k in after):
            continue
        if t in before:
            out.append(f"MEMORY.md links to a file the run deleted ({t[:80]})")
        elif t in old_links:
            continue  # missing before the run too
        elif t.lower().endswith(".md") or t not in live_exists:
            out.append(f"MEMORY.md links to a missing file ({t[:80]})")
    return out


def _is_topic(rel: str) -> bool:
    """A topic file memd may change: the one rule of core.paths, less team/ (never memd's to write)."""
    return is_topic(rel) and not is_team(rel)


def _topics(files: Collection[str]) -> set[str]:
    return {r for r in files if _is_topic(r)}


def loss_reasons(before: Mapping[str, bytes], after: Mapping[str, bytes], limits: GuardLimits, *,
                 subject: str = "the run") -> list[str]:
    """The deletion and shrink rules alone (what a sync's push is held for: ``memd.sync.job``), worded
    with ``subject`` doing it."""
    return (_deletion_reasons(before, after, limits, subject)
            + _content_reasons(diff(before, after), before, after, limits, _Parsed(), subject))


def _deletion_reasons(before: Mapping[str, bytes], after: Mapping[str, bytes], limits: GuardLimits,
                      subject: str = "the run") -> list[str]:
    before_topics = _topics(before)
    gone = before_topics - _topics(after)
    if not before_topics or not gone:
        return []
    if gone == before_topics:
        return [f"{subject} deletes every memory ({len(gone)} of {len(before_topics)})"]
    # Why max(1, ...): int(share * n) is 0 for any folder of fewer than 1/share files (under 4 at the
    # default 25%), so without the floor a tiny folder could never merge its two duplicates (a merge
    # is one write plus one deletion). One deletion is always allowed, unless the share is 0, which
    # forbids deleting altogether; "every memory" stays forbidden above, so a one-file folder still
    # cannot be emptied.
    share = limits.max_delete_share
    allowed = max(1, int(share * len(before_topics))) if share > 0 else 0
    if len(gone) > allowed:
        return [f"{subject} deletes {len(gone)} of {len(before_topics)} memories "
                f"(at most {allowed} allowed, dream.max_delete_share = {share:g})"]
    return []


def _content_reasons(chs: list[Change], before: Mapping[str, bytes], after: Mapping[str, bytes],
                     limits: GuardLimits, parsed: Callable[[bytes], frontmatter.TopicFile],
                     subject: str = "the run") -> list[str]:
    """The deletion count does not see content: a run that rewrites every memory to an empty body
    deletes nothing (facts.md section 8: "an empty reflection that wiped memory"). Rejected: a topic
    file left empty or stripped of the name or description it had; and a run that shrinks the
    topic files' bodies, in all (deleted files included), by more than the share."""
    out: list[str] = []
    for c in chs:
        if c.kind != "changed" or c.rel == INDEX_NAME or is_team(c.rel) or c.before is None or c.after is None:
            continue
        b, a = parsed(c.before), parsed(c.after)
        if b.body.strip() and not a.body.strip():
            out.append(f"{c.rel}: {subject} empties this memory (write it or delete it, not blank it)")
        for field_name in ("name", "description"):
            if getattr(b, field_name) and not getattr(a, field_name):
                out.append(f"{c.rel}: {subject} removes its {field_name}")
    before_total = sum(len(parsed(data).body.strip()) for rel, data in before.items() if _is_topic(rel))
    after_total = sum(len(parsed(data).body.strip()) for rel, data in after.items() if _is_topic(rel))
    share = limits.max_shrink_share
    lost = before_total - after_total
    if before_total and lost > max(share * before_total, limits.min_shrink_chars):
        out.append(f"{subject} shrinks the memories' content by {lost / before_total:.0%} ({lost} of "
                   f"{before_total} characters; at most {share:.0%} allowed)")
    return out


# --------------------------------------------------------------------------- declared forgetting

def forget_reasons(before: Mapping[str, bytes], after: Mapping[str, bytes],
                   gone: Collection[declared.Forgotten]) -> list[str]:
    """A model run's forgetting (``memd.core.declared``): ``gone`` are its declarations that happened
    (``declared.effective``). A merge keeps the absorbed file's facts in the absorbing file, or declares
    each sentence it drops stale; a memory the run deleted without a declaration loses no word."""
    out: list[str] = []
    said = {f.file for f in gone}
    for f in sorted(gone, key=lambda f: f.file):
        if not f.into:
            continue
        if f.into == f.file or f.into not in after or not (_is_topic(f.into) or is_team(f.into)):
            out.append(f"{f.file}: merged into {f.into[:80]}, which is not a memory in the folder after the run")
            continue
        lost = declared.dropped(before[f.file].decode("utf-8", "replace"),
                                after[f.into].decode("utf-8", "replace"), f.stale)
        if lost:
            out.append(f"{f.file}: merged into {f.into}, which does not hold {len(lost)} of its sentence(s), "
                       f"first: \"{_quote(lost[0])}\" (carry each into {f.into}, or declare it stale with "
                       "its reason)")
    for rel in sorted(_topics(before) - _topics(after) - said):
        lost_words = declared.lost_words(before[rel].decode("utf-8", "replace"), after)
        if lost_words:
            out.append(f"{rel}: the run deletes this memory without saying why, and {len(lost_words)} of its "
                       f"words are in no file after it, first: \"{_quote(' '.join(lost_words[:6]))}\" (forget "
                       "it with a reason, or merge it into the memory that holds its facts)")
    return out


def _quote(text: str) -> str:
    first = " ".join(text.split())
    return first if len(first) <= _QUOTE else first[:_QUOTE - 1].rstrip() + "…"


# --------------------------------------------------------------------------- the index's own text

_MARKS = re.compile(r"^(?:#{1,6}(?=\s|$)|[-*+](?=\s)|\d{1,9}[.)](?=\s)|>)\s*")
_QUOTE = 60


def normalise(line: str) -> str:
    """A line of text as the prose rule compares it: list markers, heading marks and quote marks at
    its start ignored (a note moved under a bullet, a heading moved a level), whitespace folded."""
    s = line.strip()
    while (m := _MARKS.match(s)) and m.end():
        s = s[m.end():]
    return " ".join(s.split())


def index_prose(text: str, skip: Collection[int] = ()) -> list[str]:
    """The user's own text in an index: every line that is not an entry (a link to a memory) and
    not blank once normalised, in file order, as written (headings, notes, rules, comments). Sync's
    conflict markers are memd's, not the user's; ``skip``: 1-based lines left out (a resolved block's)."""
    idx = mindex.parse(text)
    entries = {e.line for e in idx.entries}
    return [ln for n, ln in enumerate(idx.lines, 1)
            if n not in entries and n not in skip and normalise(ln) and not cblock.is_marker(ln)]


def lost_prose(old_index: str, after: Mapping[str, bytes], skip: Collection[int] = ()) -> list[str]:
    """The lines of ``index_prose(old_index)`` found nowhere in ``after``: neither in its index nor
    in one of its topic files (whitespace folded across lines, so a note re-wrapped still counts)."""
    hay = _haystack(after, index=True)
    return [ln for ln in index_prose(old_index, skip) if not _words_in(normalise(ln), hay)]


def _words_in(needle: str, hay: str) -> bool:
    """``needle`` in ``hay`` as whole words: "note 1" is not kept by "note 10"."""
    pattern = ("(?<!\\w)" if needle[:1].isalnum() else "") + re.escape(needle) \
        + ("(?!\\w)" if needle[-1:].isalnum() else "")
    return re.search(pattern, hay) is not None


def without_words(text: str, words: str) -> str:
    """text with the first whole-word occurrence of words (whitespace folded, any case) taken out."""
    w = " ".join(words.split())
    if not w:
        return text
    pattern = ("(?<!\\w)" if w[:1].isalnum() else "") + re.escape(w) + ("(?!\\w)" if w[-1:].isalnum() else "")
    return re.sub(pattern, " ", " ".join(text.split()), count=1, flags=re.IGNORECASE)


def _haystack(files: Mapping[str, bytes], *, index: bool) -> str:
    texts = [files[r] for r in sorted(files) if (index and r == INDEX_NAME) or _is_topic(r)]
    return "\n".join(" ".join(normalise(ln) for ln in t.decode("utf-8", "replace").splitlines()) for t in texts)


def index_notes(old_index: str, before: Mapping[str, bytes], skip: Collection[int] = ()) -> list[tuple[str, str]]:
    """The user's words after the links of ``old_index``'s entries, as (what is the user's, the whole
    hook): each hook less the linked file's description, when what is left holds a letter or a digit
    and no topic file of ``before`` holds it (then it is the index's alone). In file order, normalised."""
    topics = _haystack(before, index=False)
    out: list[tuple[str, str]] = []
    for e in mindex.parse(old_index).entries:
        hook = normalise(e.hook)
        if not hook or e.line in skip:
            continue
        rest = hook
        target, leaves = link_target(e.target, "")
        data = before.get(target) if target is not None and not leaves else None
        if data is not None and _is_topic(target or ""):
            desc = frontmatter.parse(data.decode("utf-8", "replace")).description
            rest = without_words(rest, desc if isinstance(desc, str) else "")
        rest = " ".join(rest.split()).strip(" ;,.:—–-|/…")  # a hook cut with "…" is judged by what it kept
        if any(ch.isalnum() for ch in rest) and not _words_in(rest, topics):
            out.append((rest, hook))
    return out


def lost_notes(old_index: str, before: Mapping[str, bytes], after: Mapping[str, bytes],
               skip: Collection[int] = ()) -> list[str]:
    """The ``index_notes`` of ``old_index`` found nowhere in ``after`` (its index or a topic file),
    neither the user's part nor the whole hook."""
    notes = index_notes(old_index, before, skip)
    if not notes:
        return []
    hay = _haystack(after, index=True)
    return [rest for rest, hook in notes if not _words_in(rest, hay) and not _words_in(hook, hay)]


def _prose_reasons(old: bytes | None, after: Mapping[str, bytes],
                   before: Mapping[str, bytes] | None = None, removed_by_user: Collection[str] = (),
                   released: Collection[int] = ()) -> list[str]:
    if old is None:
        return []
    text = old.decode("utf-8", "replace")
    # a line the user removed or corrected themselves (on another machine: a sync) is no loss
    gone = {normalise(ln) for ln in removed_by_user}
    out = _lost_reason([ln for ln in lost_prose(text, after, released) if normalise(ln) not in gone],
                       "text the user wrote into the index")
    if before is not None:
        notes = lost_notes(text, before, after, released)
        if notes:
            first = notes[0] if len(notes[0]) <= _QUOTE else notes[0][:_QUOTE - 1].rstrip() + "…"
            n = f"{len(notes)} entr{'ies' if len(notes) != 1 else 'y'}"
            out.append(f"MEMORY.md: the run drops the words the user wrote after an entry's link ({n}) that "
                       f"are in no file after it, first: \"{first}\" (keep them on the line, or move them "
                       "into the topic file, never drop them)")
    return out


def _lost_reason(lost: list[str], what: str) -> list[str]:
    if not lost:
        return []
    chars = sum(len(ln.strip()) for ln in lost)
    first = " ".join(lost[0].split())
    quote = first if len(first) <= _QUOTE else first[:_QUOTE - 1].rstrip() + "…"
    n = f"{len(lost)} line{'s' if len(lost) != 1 else ''}"
    return [f"MEMORY.md: the run drops {what} ({n}, {chars:,} characters) "
            f"that is in no file after it, first: \"{quote}\" (move it into a topic file and link it, "
            "never drop it)"]


# --------------------------------------------------------------------------- sync's conflict blocks

def _released_lines(old: bytes | None, resolved: Collection[cblock.Resolution]) -> set[int]:
    """The 1-based lines of the index's blocks the run resolved (markers and lines between): their
    words may go (the run decided about them)."""
    said = {r.line for r in resolved if r.file == INDEX_NAME}
    if old is None or not said:
        return set()
    out: set[int] = set()
    for b in cblock.blocks(old.decode("utf-8", "replace")):
        if b.line in said and b.end is not None:
            out.update(range(b.line, b.end + 1))
    return out


def block_reasons(before: Mapping[str, bytes], after: Mapping[str, bytes],
                  resolved: Collection[cblock.Resolution]) -> list[str]:
    """A model run's treatment of sync's conflict blocks (see the module doc): a block is resolved by
    an edit that removes it whole (both markers) and by the run saying what it decided (``resolved``);
    a block the run did not resolve keeps its words in some file."""
    said = {(r.file, r.line) for r in resolved}
    hay: str | None = None
    out: list[str] = []
    for rel in sorted(set(before) | set(after)):
        if is_team(rel) or not (rel == INDEX_NAME or _is_topic(rel)) or before.get(rel) == after.get(rel):
            continue
        old = before[rel].decode("utf-8", "replace") if rel in before else ""
        new = after[rel].decode("utf-8", "replace") if rel in after else ""
        bad = cblock.broken(new)
        if len(bad) > len(cblock.broken(old)):
            where = ", ".join(f"{why} at line {n}" for n, why in bad[:3])
            out.append(f"{rel}: the run leaves a sync conflict block half-removed ({where}): a block goes whole, "
                       "both markers, or stays")
        found = cblock.spans(old)
        if not found:
            continue
        now = cblock.spans(new)
        # a block the run keeps stays as it was: its lines are not edited, two blocks are not merged
        was = Counter((s.head, s.inner) for s in found)
        known = {s.head for s in found}
        edited: list[int] = []
        for s in now:
            if s.head in known and was[(s.head, s.inner)] > 0:
                was[(s.head, s.inner)] -= 1
            elif s.head in known:
                edited.append(s.block.line)
        if edited:
            out.append(f"{rel}: the run changes the lines of a sync conflict block it keeps (line "
                       f"{', '.join(map(str, edited[:3]))}): a block goes whole, with a decision, or stays as it was")
        heads = [s.head for s in now]
        for head in dict.fromkeys(s.head for s in found):
            mine = [s for s in found if s.head == head]
            gone = len(mine) - heads.count(head)
            decided = sum(1 for s in mine if (rel, s.block.line) in said)
            if gone > decided:
                lines = ", ".join(str(s.block.line) for s in mine if (rel, s.block.line) not in said)
                out.append(f"{rel}: the run removes {gone - decided} sync conflict block(s) (line {lines}, from "
                           f"{mine[0].block.machine}) without saying what it decided")
        if rel == INDEX_NAME:
            continue  # the index's lines: the prose and notes rules
        lost: list[str] = []
        for s in found:
            if (rel, s.block.line) in said:
                continue
            if hay is None:
                hay = _haystack(after, index=True)
            lost += [ln for ln in s.inner if normalise(ln) and not _words_in(normalise(ln), hay)]
        if lost:
            first = " ".join(lost[0].split())
            quote = first if len(first) <= _QUOTE else first[:_QUOTE - 1].rstrip() + "…"
            out.append(f"{rel}: the run drops words of a sync conflict block it did not resolve ({len(lost)} "
                       f"line(s)), first: \"{quote}\" (resolve the block and say what was decided, or keep them)")
    return out
