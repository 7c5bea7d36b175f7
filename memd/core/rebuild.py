"""A deterministic rebuild of MEMORY.md (no model): pure text and values in, a plan out.

Safe moves only, in this order: drop entries whose file is gone, merge entries that link the same
file twice (both texts kept, the later one appended unless one contains the other; first when
together they are longer than an index line may be, so a cut never takes the newer words), shorten
over-long entry lines (the hook, at a word boundary, with "…"), and index orphan topic files from
their frontmatter under the heading for their type. An orphan that is no memory (``not_a_memory``:
no frontmatter, binary, encrypted, named ``*.secret.*``) is never indexed; the plan's reasons name
it. The user's headings, prose, comments and entry order are kept; every line not touched keeps its
bytes and its line ending. When these moves cannot fit the budget the plan says so (``fits`` false,
with ``reasons``): no live entry is ever dropped to make room. Rebuilding a rebuilt index changes
nothing (``plan_rebuild(plan.text, ...)`` has no actions).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from memd.core import index
from memd.core.budget import Limits
from memd.core.files import FileRecord, FolderSnapshot
from memd.core.frontmatter import MEMORY_TYPES
from memd.core.links import fold_path, index_links, is_folder, link_target, resolve_link
from memd.core.paths import INDEX_NAME, is_utf8_name

UNLISTED = "folder unreadable"  # how memd.memfolder.walk names a sub-folder it could not list

ELLIPSIS = "…"
MIN_HOOK = 12  # shorter than this, a cut hook says nothing: shorten the title instead
# possessive: the text is (spaces/# then one other character)*, so a long inner run of spaces is
# not tried at every split (the lazy (.*?) before [ \t#]*$ was quadratic); same groups as before
_HEADING = re.compile(r"^(#{1,6})[ \t]++((?:[ \t#]*+[^ \t#\n])*+)[ \t#]*+$")
_TYPE_TITLES = {"user": "User", "feedback": "Feedback", "project": "Project", "reference": "Reference"}


@dataclass(frozen=True)
class TopicInfo:
    """What the rebuild needs to know of one topic file."""

    rel: str
    name: str | None = None
    description: str | None = None
    type: str | None = None
    team: bool = False  # in memory/team/: linked entries are live, but it is never indexed here
    not_memory: str = ""  # why the file is no memory (``not_a_memory``): linked entries stay, none is added
    unlisted: bool = False  # a folder memd could not list: what it holds is unknown, so links into it stay

    @classmethod
    def from_record(cls, rec: FileRecord) -> TopicInfo:
        tf = rec.topic
        why = not_a_memory(rec) or ""
        if tf is None or not tf.has_frontmatter or tf.error:
            return cls(rec.rel, team=rec.team, not_memory=why)
        t = tf.type if tf.type in MEMORY_TYPES else None
        return cls(rec.rel, tf.name, tf.description, t, rec.team, why)


# Files a user or a tool put beside the memories that are no memory: a rebuild never indexes them
# (a session would be pointed at a secret, a blob or a binary), ``memd check`` reports them (MEM015).
_SECRET_NAME = frozenset(("secret", "secrets", "enc", "encrypted", "gpg", "pgp", "age", "vault", "sops"))
_ENCRYPTED = ("-----BEGIN PGP MESSAGE-----", "$ANSIBLE_VAULT;", "age-encryption.org/v1", "ENC[AES256_GCM,",
              "-----BEGIN ENCRYPTED", "-----BEGIN AGE ENCRYPTED FILE-----", "U2FsdGVkX1")  # openssl's "Salted__"
_CONTROL = re.compile("[\x00-\x08\x0b\x0e-\x1f]")  # control characters but tab, newline, CR, form feed
_NOT_BLOB = re.compile(r"[^A-Za-z0-9+/=_\-\s]")  # a character neither base64-like nor white space
_SPACE = re.compile(r"\s")


def not_a_memory(rec: FileRecord) -> str | None:
    """Why a ``*.md`` file is not a memory, or None when it may be one: a name marked secret or
    encrypted (``keys.secret.md``), no text (not UTF-8), binary-looking text, an encrypted body, a
    blob (one run of base64-like characters), no frontmatter."""
    name = rec.rel.rsplit("/", 1)[-1]
    if _SECRET_NAME & {p.casefold() for p in name.split(".")[1:-1]}:
        return "its name marks it secret or encrypted"
    text = rec.text
    if text is None:
        return f"it is not text ({rec.problem or 'unreadable'})"
    head = text[:4096]
    if "\x00" in head or len(_CONTROL.findall(head)) > len(head) // 20:
        return "it looks binary"
    if any(m in head for m in _ENCRYPTED):
        return "it looks encrypted"
    if _NOT_BLOB.search(head) is None and len(head) - len(_SPACE.findall(head)) >= 64:
        return "it looks like an encoded blob"  # one run of base64-like characters, 64 or more
    tf = rec.topic
    if tf is not None and not tf.has_frontmatter:
        return "it has no frontmatter"
    return None


def topics_of(snap: FolderSnapshot) -> dict[str, TopicInfo]:
    """Every topic file of a snapshot (team/ included, marked). A ``*.md`` file that is there but no
    topic memd reads (not one by the rule, as ``logs/x.md`` or ``sub/MEMORY.md``; too large,
    unreadable, not a regular file; a symlink leaving the folder, which Claude Code follows and memd
    does not) is marked as team/'s are: an entry linking it stays, none is added for it."""
    out = {t.rel: TopicInfo.from_record(t) for t in snap.topics()}
    # a name that is not UTF-8 cannot be linked from MEMORY.md (UTF-8 text): kept out, as team/'s are
    out.update([(rel, TopicInfo(rel, team=True)) for rel in out if not is_utf8_name(rel)])
    out.update((f.rel, TopicInfo(f.rel, team=True)) for f in snap.files
               if f.rel not in out and not f.is_index and f.rel.endswith(".md"))
    # A sub-folder the walk could not list (permission denied): unreadable is not missing.
    out.update((f.rel, TopicInfo(f.rel, team=True, unlisted=True)) for f in snap.files
               if f.rel not in out and f.problem is not None and f.problem.startswith(UNLISTED))
    return out


@dataclass(frozen=True)
class RebuildPlan:
    text: str  # the proposed MEMORY.md
    original: str | None
    fits: bool  # the proposed text fits the budget (nothing past the cut)
    reasons: list[str] = field(default_factory=list)  # why it does not fit, or what was left alone
    actions: list[str] = field(default_factory=list)  # what changed, one line each
    before: index.Budget | None = None
    after: index.Budget | None = None

    @property
    def changed(self) -> bool:
        return self.text != (self.original or "")


@dataclass
class _Line:
    text: str
    end: str  # "\n", "\r\n" or "" (last line without a newline)


def _split(text: str) -> list[_Line]:
    parts = text.split("\n")
    out = [_Line(p[:-1], "\r\n") if p.endswith("\r") else _Line(p, "\n") for p in parts[:-1]]
    if parts[-1]:
        out.append(_Line(parts[-1], ""))
    return out


def _join(lines: list[_Line]) -> str:
    return "".join(ln.text + ln.end for ln in lines)


def shorten(line: str, limit: int) -> str | None:
    """The entry line cut to at most ``limit`` characters, or None when even the bare link is longer."""
    if len(line) <= limit:
        return line
    m = index.ENTRY.match(line)
    if m is None:
        return None
    rest = m.group("rest")
    head = line[:len(line) - len(rest)]
    sep_m = re.match(r"^\s*(?:[—–:]|-{1,2})?\s*", rest)
    sep = sep_m.group(0) if sep_m else ""
    hook = rest[len(sep):].rstrip()
    room = limit - len(head) - len(sep)
    if hook and room >= MIN_HOOK:
        return head + sep + _cut(hook, room)
    # the title and link alone are (nearly) too long: shorten the title, drop the hook
    title = m.group("title")
    fixed = len(head) - len(title)
    title_room = limit - fixed
    if title_room < 4:
        return None
    new_head = head[:m.start("title")] + _cut(title, title_room) + head[m.end("title"):]
    return new_head if len(new_head) <= limit else None


def merge_entries(keep: index.Entry, later: index.Entry, limit: int) -> index.Entry | None:
    """Two entries linking one file as one line at ``keep``'s place, keeping both texts: the later
    entry's hook (and its title, when it says something the first title does not) is appended after
    "; ", or replaces the first hook when it contains it; nothing is added when the first already
    contains it. When both together are longer than ``limit`` the later text comes first, so that
    shortening the line cuts the older words, never the newer. None when ``keep`` is no entry line."""
    m = index.ENTRY.match(keep.text)
    if m is None:
        return None
    a, extra = keep.hook.strip(), later.hook.strip()
    t1, t2 = " ".join(keep.title.split()), " ".join(later.title.split())
    if t2 and not _has_words(t1, t2) and not _has_words(t2, t1):
        extra = f"{t2}: {extra}" if extra else t2
    if not extra or _has_words(a, extra):
        hook = a
    elif not a or _has_words(extra, a):
        hook = extra
    else:
        hook = f"{a}; {extra}"
    if hook == a:
        return keep
    rest = m.group("rest")
    head = keep.text[:len(keep.text) - len(rest)]
    sep = rest[:rest.find(a)] if a and a in rest else " — "
    if len(head + sep + hook) > limit and hook != extra:
        hook = f"{extra}; {a}"
    return index.Entry(keep.line, keep.title, keep.target, hook, head + sep + hook)


def _has_words(hay: str, needle: str) -> bool:
    """``needle`` in ``hay`` as whole words, case and all: the guard's rule (``core.guard._words_in``:
    "a" is not kept by "Xa", nor "x" by "X"), so what the rebuild counts as kept the guard does too."""
    from memd.core.guard import _words_in

    return _words_in(" ".join(needle.split()), " ".join(hay.split()))


def _cut(text: str, room: int) -> str:
    """text cut to at most room characters at a word boundary, ending in "…"."""
    if len(text) <= room:
        return text
    cut = text[:room - 1]
    space = cut.rfind(" ")
    if space >= room // 2:
        cut = cut[:space]
    if cut.count("`") % 2:  # never leave a code span open
        cut = cut[:cut.rfind("`")]
    bracket = cut.rfind("[")
    link = cut.find("](", bracket) if bracket >= 0 else -1
    if bracket >= 0 and (cut.find("]", bracket) < 0 or (link >= 0 and ")" not in cut[link + 2:])):
        cut = cut[:bracket]  # nor a link cut in half
    cut = cut.rstrip(" ,;:—–-.(\\")
    return cut + ELLIPSIS


def _escape_title(t: str) -> str:
    return " ".join(t.split()).replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


def entry_line(topic: TopicInfo, limit: int) -> str:
    """An index line for a topic file: ``- [Name](file.md) — description``, within limit."""
    title = _escape_title(topic.name or topic.rel.rsplit("/", 1)[-1].removesuffix(".md"))
    target = topic.rel
    if re.search(r"[<>\x00-\x1f\x7f]", target):  # a line break in a name would break the line in two
        from urllib.parse import quote

        target = quote(target, safe="/")
    elif re.search(r"[\s()]", target):
        target = f"<{target}>"
    line = f"- [{title}]({target})"
    if topic.description:
        line += " — " + " ".join(topic.description.split())
    return shorten(line, limit) or line


NORMALISE = "normalise"  # a person asked (`memd rebuild`): also merge repeats and shorten long lines
REPAIR = "repair"  # unattended (a dream without a model, auto relief, a run's final rebuild): only what is broken
MODES = (NORMALISE, REPAIR)


CONDENSE_TO = 100  # characters an entry line is condensed to when a repair makes room (``condense``)


def plan_rebuild(index_text: str | None, topics: Mapping[str, TopicInfo], budget: Limits | None = None, *,
                 mode: str, drop_notes: bool = False, former: Mapping[str, TopicInfo] | None = None,
                 withhold: Collection[str] = (), condense: bool = False, shrink: bool = True) -> RebuildPlan:
    """Plan the rebuilt MEMORY.md for a folder whose topic files are ``topics`` (keyed by rel path).

    Where memd's writers meet (the rule of every one of them): the smallest edit that reaches the goal.

    ``REPAIR`` (every unattended caller) changes only what is broken, and then only the lines it
    must: an entry whose file is gone, a topic file missing from the index. Within the budget that is
    all: a long line, a repeated link, the user's order and wording stay byte for byte. Over the budget
    it may also merge entries that link one file (both texts kept) and shorten long lines whose words
    the linked file's description holds anyway (nothing is lost), longest first, only until it fits.

    ``NORMALISE`` (``memd rebuild``, a person asking, diff shown) also merges every repeat and
    shortens every long entry line; each action names the words a cut leaves out.

    In both modes an entry whose file is gone keeps the words after its link that no file holds (the
    user's words, like prose): the line stays as plain text without the link. ``drop_notes`` (only
    ``memd rebuild --drop-notes``) drops those lines too, and the action quotes what went. ``former``:
    topic files that were there when the run began and that the run deleted (the apply pipeline knows
    them): a hook that only repeats one of their descriptions is that file's, not the user's.
    ``withhold``: unindexed topic files not to index (``memd.apply.finalize``: files whose lines would
    put the index past its budget); each is named in the plan's reasons, and no link to them is touched.
    ``condense`` (a model run's final repair, ``memd.apply.finalize``): in a REPAIR still over the budget
    in characters (not in lines), entry lines whose hook only repeats their file's description are also
    cut to ``CONDENSE_TO`` characters, longest first, until the index fits: room for the run's new
    files' lines, no word lost (the description holds it; the link stays). ``shrink=False`` (a sync's
    repair, issue 33): a REPAIR over the budget stays as long as it is (no repeat merged, no line cut):
    a sync carries the index both machines wrote, and only a dream or the user condenses it; a repair
    that shortened it on one machine made every other machine's version differ, for good."""
    if mode not in MODES:
        raise ValueError(f"unknown rebuild mode {mode!r}")
    b = budget or Limits()
    if mode == NORMALISE:
        return _plan(index_text, topics, b, merge=True, shorten_all=True, drop_notes=drop_notes, former=former,
                     withhold=withhold)
    plan = _plan(index_text, topics, b, merge=False, shorten_all=False, drop_notes=drop_notes, former=former,
                 withhold=withhold)
    if plan.fits or not shrink:
        return plan
    # over the budget: repeats merged (no word lost), then derived long lines cut until it fits
    return _plan(index_text, topics, b, merge=True, shorten_all=False, drop_notes=drop_notes, former=former,
                 withhold=withhold, condense=condense)


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()


def own_words(hook: str, linked: TopicInfo | None, topics: Mapping[str, TopicInfo]) -> str:
    """The words after an entry's link that no topic file's name or description holds: what only the
    index keeps (the user's note; the guard's ``index_notes`` judges the same way, against whole files).
    The linked file's description is taken out of the hook first, so
    "<description> (ADR-015 to revise)" leaves "(ADR-015 to revise)". Empty when nothing is left that
    has a letter or a digit."""
    from memd.core.guard import without_words

    rest = without_words(hook, linked.description or "") if linked is not None else " ".join(hook.split())
    rest = " ".join(rest.split()).strip(" ;,.:—–-|/…")  # a hook cut with "…" is judged by what it kept
    if not any(ch.isalnum() for ch in rest):
        return ""
    for t in topics.values():
        for said in (t.description, t.name):
            if said and _has_words(said, rest):  # whole words, as the guard judges: "a" is not in "abc"
                return ""
    return rest


def _derived(e: index.Entry, linked: TopicInfo | None) -> bool:
    """The entry's hook says nothing its linked file's description does not: cutting it loses no word."""
    hook = " ".join(e.hook.split())
    return bool(linked is not None and linked.description and hook and _has_words(linked.description, hook))


def plain_line(e: index.Entry) -> str:
    """An entry as a plain list line without its link: ``- Title — hook`` (the user's words kept)."""
    m = index.ENTRY.match(e.text)
    assert m is not None
    title = re.sub(r"\\(.)", r"\1", m.group("title")).strip()
    rest = m.group("rest")
    head = e.text[:m.start("title") - 1]  # indent, marker and the space before "["
    if not title:
        return head + rest.lstrip(" \t—–:-").lstrip()
    return head + title + rest


def _cut_words(old: str, new: str) -> str:
    """The words of ``old`` that shortening to ``new`` leaves out, quoted for an action line."""
    kept = new.removesuffix(ELLIPSIS).rstrip()
    if old.startswith(kept):
        gone = old[len(kept):].strip()
    else:  # the title was cut (and the hook dropped): what lies between the common ends
        a = len(_common_prefix(old, new))
        z = len(_common_prefix(old[a:][::-1], new[a:][::-1]))
        gone = old[a:len(old) - z].strip()
    return gone if len(gone) <= 80 else gone[:79].rstrip() + ELLIPSIS


def _common_prefix(a: str, b: str) -> str:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return a[:n]


def _plan(index_text: str | None, topics: Mapping[str, TopicInfo], b: Limits, *, merge: bool,
          shorten_all: bool, drop_notes: bool, former: Mapping[str, TopicInfo] | None,
          withhold: Collection[str] = (), condense: bool = False) -> RebuildPlan:
    original = index_text
    text = index_text or ""
    nl = "\r\n" if "\r\n" in text else "\n"
    lines = _split(text)
    idx = index.parse(text)
    before = index.measure(text, b.max_lines, b.max_chars, b.warn_ratio, idx=idx) if text else None
    actions: list[str] = []
    reasons: list[str] = []
    drop: set[int] = set()  # 1-based lines removed
    plain: set[int] = set()  # entries whose file is gone, kept as plain text for their words
    first: dict[str, index.Entry] = {}
    live_links: set[str] = set()
    folded = {fold_path(r): r for r in sorted(topics)}
    unlisted = [r.rstrip("/") + "/" for r, t in topics.items() if t.unlisted]

    for e in idx.entries:
        target, leaves = link_target(e.target, "")
        if target is None or leaves:
            continue
        # a link that finds its file only ignoring case works on macOS: live, never dropped
        rel = resolve_link(target, topics, folded)[0] or target
        if rel.lower().endswith(".md") and rel not in topics and not is_folder(rel, topics):
            if any(rel.startswith(u) for u in unlisted):
                continue  # in a folder memd cannot list: unknown, not missing
            words = own_words(e.hook, (former or {}).get(rel), {**(former or {}), **topics})
            if words and not drop_notes:
                lines[e.line - 1].text = plain_line(e)
                plain.add(e.line)
                actions.append(f"kept entry {e.title!r} at line {e.line} as plain text without its link "
                               f"({rel} does not exist; its words are in no other file)")
                continue
            drop.add(e.line)
            said = f" and its words \"{_cut_words(words, '')}\"" if words else ""
            actions.append(f"dropped entry {e.title!r} at line {e.line}{said}: {rel} does not exist")
            continue
        if rel in first:
            if not merge:
                continue  # a repeat is not broken: left as the user wrote it
            keep = first[rel]
            merged = merge_entries(keep, e, b.max_index_line)
            if merged is None:  # not an entry line after all: left as it is
                continue
            drop.add(e.line)
            lines[keep.line - 1].text = merged.text
            first[rel] = merged
            actions.append(f"merged entry {e.title!r} at line {e.line} into line {keep.line} (both link {rel})")
            continue
        first[rel] = e
    _keep_fence_shape(lines, idx, drop, actions, reasons)
    for n, _raw, target, leaves in index_links(idx):
        if target is not None and not leaves and n not in drop and n not in plain:
            live_links.add(resolve_link(target, topics, folded)[0] or target)

    orphans = [t for rel, t in sorted(topics.items())
               if not t.team and not t.not_memory and rel not in live_links and rel != INDEX_NAME]
    held = [t.rel for t in orphans if t.rel in withhold]
    orphans = [t for t in orphans if t.rel not in withhold]
    orphan_actions: list[str] = []
    orphan_reasons = [f"left {rel} unindexed: its line would put the index past its budget "
                      "(recall still finds the file by its description)" for rel in held]
    orphan_reasons += [f"{rel} is not indexed: {t.not_memory}, so it is no memory" for rel, t in sorted(topics.items())
                      if t.not_memory and not t.team and rel not in live_links and rel != INDEX_NAME]
    inserts = _place_orphans(lines, idx, orphans, b.max_index_line, nl, orphan_actions, orphan_reasons,
                             fresh=not text.strip())

    def render() -> str:
        out: list[_Line] = []
        for i, ln in enumerate(lines, 1):
            if i not in drop:
                out.append(_Line(ln.text, ln.end))
            for new in inserts.get(i, []):
                if out and out[-1].end == "":
                    out[-1].end = nl
                out.append(_Line(new, nl))
        for new in inserts.get(0, []):
            if out and out[-1].end == "":
                out[-1].end = nl
            out.append(_Line(new, nl))
        return _join(out)

    # long entry lines: every one when normalising; over the budget in a repair, only lines whose words
    # the linked file's description holds, longest first, and only until the index fits
    long: list[tuple[int, index.Entry]] = []
    for e in idx.entries:
        if e.line in drop or e.line in plain:
            continue
        length = index.line_length(lines[e.line - 1].text)
        if length > b.max_index_line:
            long.append((length, e))
    if not shorten_all:
        new_text = render()
        if index.measure(new_text, b.max_lines, b.max_chars, b.warn_ratio).level == "over":
            long.sort(key=lambda le: (-le[0], le[1].line))
            long = [le for le in long if _derived(le[1], _linked(le[1], topics, folded))
                    and lines[le[1].line - 1].text == le[1].text]
        else:
            long = []
    else:
        long.sort(key=lambda le: le[1].line)
    for length, e in long:
        cur = lines[e.line - 1].text
        # shorten counts code points: leave room for the units a character past U+FFFF adds
        short = shorten(cur, b.max_index_line - (length - len(cur)))
        if short is None:
            reasons.append(f"line {e.line}: the link of {e.title!r} alone is longer than "
                           f"{b.max_index_line} characters; left as it is")
            continue
        lines[e.line - 1].text = short
        actions.append(f"shortened entry {e.title!r} at line {e.line} from {length} to "
                       f"{index.line_length(short)} characters, leaving out \"{_cut_words(cur, short)}\"")
        if not shorten_all and index.measure(render(), b.max_lines, b.max_chars, b.warn_ratio).level != "over":
            break
    if condense and not shorten_all:
        _condense(lines, idx, topics, folded, b, drop | plain, render, actions)
    actions.extend(orphan_actions)  # in the order a reader meets them: fixes first, additions last
    reasons.extend(orphan_reasons)

    new_text = render()
    after = index.measure(new_text, b.max_lines, b.max_chars, b.warn_ratio)
    fits = after.level != "over"
    if not fits:
        reasons.insert(0, _why_not(orphans, after))
        if plain:
            reasons.insert(1, f"{len(plain)} entr{'ies' if len(plain) != 1 else 'y'} whose file is gone "
                              "were kept as plain text for the words after the link (`memd rebuild --drop-notes` "
                              "drops them, and says which words go)")
    return RebuildPlan(new_text, original, fits, reasons, actions, before, after)


def _condense(lines: list[_Line], idx: index.Index, topics: Mapping[str, TopicInfo], folded: Mapping[str, str],
              b: Limits, skip: set[int], render: Callable[[], str], actions: list[str]) -> None:
    """Make room in an index over its budget in characters: entry lines whose hook only repeats their
    file's description (``_derived``), longer than ``CONDENSE_TO``, cut to it, longest first, until it
    fits. Nothing when the index is over in lines (a shorter line is still a line)."""
    now = index.measure(render(), b.max_lines, b.max_chars, b.warn_ratio)
    if now.level != "over" or now.lines > b.max_lines:
        return
    cands = []
    for e in idx.entries:
        cur = lines[e.line - 1].text
        length = index.line_length(cur)
        if e.line not in skip and length > CONDENSE_TO and _derived(e, _linked(e, topics, folded)):
            cands.append((length, e))
    for length, e in sorted(cands, key=lambda le: (-le[0], le[1].line)):
        cur = lines[e.line - 1].text
        short = shorten(cur, CONDENSE_TO - (length - len(cur)))
        if short is None or short == cur:
            continue
        lines[e.line - 1].text = short
        actions.append(f"condensed entry {e.title!r} at line {e.line} from {length} to {index.line_length(short)} "
                       f"characters to make room, leaving out \"{_cut_words(cur, short)}\" (its file's "
                       "description holds it)")
        if index.measure(render(), b.max_lines, b.max_chars, b.warn_ratio).level != "over":
            return


def _linked(e: index.Entry, topics: Mapping[str, TopicInfo], folded: Mapping[str, str]) -> TopicInfo | None:
    target, leaves = link_target(e.target, "")
    if target is None or leaves:
        return None
    rel = resolve_link(target, topics, folded)[0]
    return topics.get(rel) if rel is not None else None


_DASHES = re.compile(r"^(?:\ufeff)?---[ \t]*$")


def _keep_fence_shape(lines: list[_Line], idx: index.Index, drop: set[int], actions: list[str],
                      reasons: list[str]) -> None:
    """Never let dropped lines leave a "---" rule as the file's first line: Claude Code would then
    read it as the start of frontmatter and hide what follows. One dropped line before it stays."""
    if 1 in idx.masked or not drop or 1 not in drop:
        return
    first = next((n for n in range(1, len(lines) + 1) if n not in drop), None)
    if first is None or not _DASHES.match(lines[first - 1].text):
        return
    keep = max(n for n in drop if n < first)
    drop.discard(keep)
    for i, a in enumerate(actions):
        if f" at line {keep}:" in a or f" at line {keep} into" in a:
            del actions[i]
            break
    reasons.append(f"line {keep} was kept although it should go: without it the '---' on line {first} "
                   "would start frontmatter and hide the entries below it")


def _why_not(orphans: list[TopicInfo], after: index.Budget) -> str:
    figures = (f"{after.lines} lines (limit {after.max_lines}), {after.chars:,} characters "
               f"(limit {after.max_chars:,})")
    hidden = ", ".join(repr(e.title) for e in after.hidden[:10])
    more = f" and {len(after.hidden) - 10} more" if len(after.hidden) > 10 else ""
    msg = (f"safe moves cannot fit the budget: the rebuilt index would be {figures}"
           + (f", and {len(after.hidden)} live entries would stay hidden ({hidden}{more})" if after.hidden else "")
           + "; no live entry is dropped to make room: condense it by hand or with `memd dream`")
    if orphans:
        msg += f" ({len(orphans)} unindexed topic file(s) were added)"
    return msg


def _sections(lines: list[_Line], idx: index.Index) -> list[tuple[int, int, str]]:
    """(line, level, title) of every heading outside frontmatter and comments."""
    out: list[tuple[int, int, str]] = []
    for n, ln in enumerate(lines, 1):
        if n in idx.masked or n in idx.fenced:
            continue
        m = _HEADING.match(ln.text)
        if m:
            out.append((n, len(m.group(1)), m.group(2).strip()))
    return out


def _place_orphans(lines: list[_Line], idx: index.Index, orphans: list[TopicInfo], limit: int, nl: str,
                   actions: list[str], reasons: list[str], *, fresh: bool) -> dict[int, list[str]]:
    """Where each orphan's new line goes: {after line n: [lines]}, 0 meaning the end of the file."""
    inserts: dict[int, list[str]] = {}
    if not orphans:
        return inserts
    if idx.open_at_end:
        what = "code block" if idx.open_fence else "HTML comment"
        reasons.append(f"MEMORY.md ends inside a {what} that is never closed; {len(orphans)} unindexed "
                       f"topic file(s) were not added (close the {what} first)")
        return inserts
    heads = _sections(lines, idx)
    entry_lines = {e.line for e in idx.entries}
    new_sections: dict[str, list[str]] = {}
    for t in orphans:
        line = entry_line(t, limit)
        kind = t.type or "other"
        where = _section_end(lines, idx, heads, kind, entry_lines)
        if where is not None:
            inserts.setdefault(where[0], []).append(line)
            actions.append(f"indexed {t.rel} under {where[1]!r}")
        elif heads or fresh:
            title = _TYPE_TITLES.get(kind, "Other")
            new_sections.setdefault(title, []).append(line)
            actions.append(f"indexed {t.rel} under a new heading '## {title}'")
        else:
            inserts.setdefault(0, []).append(line)
            actions.append(f"indexed {t.rel} at the end")
    if new_sections:
        tail: list[str] = []
        has_content = any(ln.text.strip() for ln in lines)
        if has_content and lines[-1].text.strip():
            tail.append("")
        order = [*(_TYPE_TITLES[k] for k in ("user", "feedback", "project", "reference")), "Other"]
        for i, title in enumerate(x for x in order if x in new_sections):
            if i:
                tail.append("")
            tail.append(f"## {title}")
            tail.extend(new_sections[title])
        end = inserts.setdefault(0, [])
        if end:  # plain appended lines (no headings) come first
            tail = [*end, *tail]
        inserts[0] = tail
    return inserts


def _section_end(lines: list[_Line], idx: index.Index, heads: list[tuple[int, int, str]], kind: str,
                 entry_lines: set[int]) -> tuple[int, str] | None:
    """(line after which to insert, heading text) in the section of the first heading naming the type:
    after its last entry (and that entry's indented continuation lines), else after its last line."""
    if kind not in _TYPE_TITLES:
        return None
    for i, (n, level, title) in enumerate(heads):
        if kind not in title.casefold():
            continue
        end = len(lines)
        for n2, level2, _ in heads[i + 1:]:
            if level2 <= level:
                end = n2 - 1
                break
        last_entry = max((e for e in entry_lines if n < e <= end), default=None)
        if last_entry is not None:
            end = last_entry
            while (end < len(lines) and lines[end].text[:1] in (" ", "\t") and lines[end].text.strip()
                   and end + 1 not in idx.fenced):
                end += 1  # the entry's indented continuation lines
        while end > n and not lines[end - 1].text.strip():
            end -= 1
        if idx.inside_block(end):
            return None
        return end, lines[n - 1].text.strip()
    return None
