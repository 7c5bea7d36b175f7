"""The memory-folder linter: findings with stable codes, like ruff's (pure: snapshot in, findings out).

Each code has one severity and a short name (``CODES``); docs/check.md describes them all.
Paths are relative to the memory folder ("." for the folder itself); lines are 1-based (1 for
findings about a whole file). Messages name what is wrong and where, never a secret's value.

Scope: the budget, orphan and dangling-link checks apply to the user's own index (MEMORY.md and the
files beside it). ``team/`` is synced from a server and read-only: its files get the per-file checks
(encoding, frontmatter, dates, secrets with personal data) but no index checks.
"""

from __future__ import annotations

import posixpath
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from itertools import chain, combinations, filterfalse

from memd.core import conflict as cblock
from memd.core import fastscan, frontmatter, index, secrets
from memd.core.budget import Limits, refdefs_kept
from memd.core.dates import relative_dates
from memd.core.files import FileRecord, FolderSnapshot
from memd.core.findings import CODES, ERROR, INFO, SEVERITIES, WARNING, Code, Finding, counts, sort_key
from memd.core.findings import finding as _f
from memd.core.links import LINK, index_links, is_folder, link_target, mask_code, resolve_link
from memd.core.paths import INDEX_NAME, is_utf8_name
from memd.core.rebuild import not_a_memory
from memd.record import Record

__all__ = ["CODES", "ERROR", "INFO", "SEVERITIES", "WARNING", "Code", "Finding", "Report", "check", "counts", "lint",
           "sort_key"]


class Report(Record):
    findings: list[Finding]
    budget: index.Budget | None  # MEMORY.md measured against its budget (None without a readable one)


def lint(snap: FolderSnapshot, budget: Limits | None = None, *, team_pii: bool = True,
         today: str | None = None) -> list[Finding]:
    """Every finding for one memory folder, sorted (folder, MEMORY.md, then files by path and line)."""
    return check(snap, budget, team_pii=team_pii, today=today).findings


def check(snap: FolderSnapshot, budget: Limits | None = None, *, team_pii: bool = True,
          today: str | None = None, said_on: Mapping[str, tuple[str, ...]] | None = None) -> Report:
    """The findings and the measured index of one memory folder (``said_on``: per file, the days of the
    sessions a catch-up wrote it from, for MEM040's hint)."""
    b = budget or Limits()
    out: list[Finding] = []
    if not snap.exists:
        return Report(out, None)
    if snap.problem:
        return Report([_f("MEM071", ".", 1, f"the memory folder cannot be read: {snap.problem}")], None)
    if snap.truncated:
        out.append(_f("MEM072", ".", 1, "the memory folder has too many entries or is nested too deeply; "
                                        "only part of it was checked"))
    for rec in snap.files:
        out.extend(_file_problems(rec))
    measured: index.Budget | None = None
    index_rec = snap.index
    if index_rec is not None and index_rec.text is not None:
        keep = refdefs_kept(b)  # the loading of the Claude Code version the user runs
        idx = index.parse(index_rec.text, refdefs=keep)
        measured = index.measure(index_rec.text, b.max_lines, b.max_chars, b.warn_ratio, idx=idx, refdefs=keep)
        out.extend(_index_checks(snap, b, idx, measured))
    elif index_rec is None:
        out.extend(_no_index(snap))
    topics = [t for t in snap.topics() if t.text is not None]
    for rec in topics:
        out.extend(_frontmatter_checks(rec, b))
        out.extend(_topic_links(rec, snap))
    out.extend(_duplicates(topics))
    out.extend(_too_many(snap, b))
    texts = [rec for rec in snap.files if rec.text is not None]
    for rec in texts:
        out.extend(relative_dates(rec, today, said_on.get(rec.rel, ()) if said_on else ()))
        if not rec.team and cblock.BEGIN in (rec.text or ""):
            out.extend(_conflict_blocks(rec))
    for strict in (False, True):
        group = [rec for rec in texts if rec.team == strict]
        scanned = fastscan.scan_many([r.text or "" for r in group], strict=strict, pii=team_pii)
        for rec, hits in zip(group, scanned, strict=True):
            out.extend(_secret_findings(rec, hits))
    out.sort(key=sort_key)
    return Report(out, measured)


# --------------------------------------------------------------------------- files


def _file_problems(rec: FileRecord) -> Iterable[Finding]:
    if rec.leaves_folder:
        yield _f("MEM008", rec.rel, 1, f"symlink to {rec.symlink} leaves the memory folder")
        return
    p = rec.problem
    if p is None:
        return
    if p == "not valid UTF-8":
        yield _f("MEM060", rec.rel, 1, "not valid UTF-8; Claude Code and memd cannot read it as text")
    elif p.startswith("too large"):
        yield _f("MEM061", rec.rel, 1, f"{p}; keep memory files small")
    else:
        yield _f("MEM062", rec.rel, 1, f"cannot be read: {p}")


def _conflict_blocks(rec: FileRecord) -> Iterable[Finding]:
    """MEM090: each block sync left with another machine's differing lines (``memd.core.conflict``)."""
    for b in cblock.blocks(rec.text or ""):
        when = f" on {b.date}" if b.date else ""
        span = f"lines {b.line}-{b.end}" if b.end is not None else f"from line {b.line}, never closed"
        yield _f("MEM090", rec.rel, b.line, f"an unresolved sync conflict ({span}): the lines in the block are "
                 f"{b.machine}'s{when} and differ from this machine's; keep what is right, then delete the block "
                 "and its markers")


# --------------------------------------------------------------------------- the index

def _no_index(snap: FolderSnapshot) -> Iterable[Finding]:
    root_topics = [t for t in snap.topics() if not t.team]
    if root_topics:
        yield _f("MEM070", ".", 1, f"no {INDEX_NAME}: {len(root_topics)} topic file(s) are not indexed; "
                                   "run `memd rebuild` to write one", fixable=True)


def _frontmatter_entries(idx: index.Index) -> Iterable[Finding]:
    """Entry lines inside what Claude Code reads as frontmatter: never loaded, and not counted as entries."""
    end = index.frontmatter_end(idx.text)
    if end < 2:
        return
    hidden = [(n, m.group("title")) for n, ln in enumerate(idx.lines[1:end - 1], 2) if (m := index.ENTRY.match(ln))]
    if not hidden:
        return
    names = ", ".join(repr(t) for _, t in hidden[:10]) + (f" and {len(hidden) - 10} more" if len(hidden) > 10 else "")
    yield _f("MEM081", INDEX_NAME, hidden[0][0],
             f"lines 1-{end} are read as frontmatter (line 1 is '---' and line {end} closes it): "
             f"{len(hidden)} index entr{'ies' if len(hidden) != 1 else 'y'} there never load: {names}; "
             "remove the '---' on line 1, or move the entries below line " + str(end))


def _index_checks(snap: FolderSnapshot, b: Limits, idx: index.Index,
                  budget: index.Budget) -> Iterable[Finding]:
    root_topics = [t for t in snap.topics() if not t.team]
    figures = (f"{budget.lines} lines (limit {budget.max_lines}), "
               f"{budget.chars:,} characters (limit {budget.max_chars:,})")
    if budget.level == "over":
        names = ", ".join(repr(e.title) for e in budget.hidden)
        tail = f"; {len(budget.hidden)} entries are never loaded: {names}" if budget.hidden else ""
        first = budget.hidden[0].line if budget.hidden else 1
        yield _f("MEM001", INDEX_NAME, first, f"over budget: {figures}{tail}")
        for e in budget.hidden:
            yield _f("MEM003", INDEX_NAME, e.line, f"entry {e.title!r} ({e.target}) is past the cut and "
                                                   "never reaches a session")
    elif budget.level == "near":
        yield _f("MEM002", INDEX_NAME, 1, f"near budget: {figures}; condense it before entries fall off the end")
    entry_lines = {e.line: e for e in idx.entries}  # rebuild shortens entries, never prose
    for n, length in index.long_lines(idx, b.max_index_line):
        yield _f("MEM004", INDEX_NAME, n, f"line is {length} characters (limit {b.max_index_line}); "
                                          "an index line is a title and a short hook", b.max_index_line + 1,
                 fixable=n in entry_lines)
    if idx.open_comment and idx.src is not None:
        # Claude Code strips only closed comments: this one, and all that follows it, is loaded as text
        start = idx.src.open_comment
        shown = [ln for ln in idx.lines[start:] if index.ENTRY.match(ln)]
        yield _f("MEM080", INDEX_NAME, start, f"the HTML comment opened here is never closed: Claude Code "
                 f"loads it as text, with the {len(idx.lines) - start} lines after it"
                 + (f" ({len(shown)} of them index entries)" if shown else "")
                 + "; close it with --> or remove it")
    yield from _frontmatter_entries(idx)
    existing = snap.by_rel
    folded = snap.folded
    linked: set[str] = set()
    first_entry: dict[str, int] = {}
    for n, raw, target, leaves in index_links(idx):
        if target is None:
            continue
        col = idx.lines[n - 1].find(raw) + 1 or 1
        if leaves:
            yield _f("MEM007", INDEX_NAME, n, f"link to {raw} leaves the memory folder", col)
            continue
        rel, inexact = resolve_link(target, existing, folded)
        if rel is None:
            if not is_folder(target, existing) and target.lower().endswith(".md"):
                # memd lists only .md files: other targets are not judged
                yield _f("MEM005", INDEX_NAME, n, f"link to {raw}: no such file in the memory folder", col,
                         fixable=n in entry_lines and entry_lines[n].target == raw)  # the entry is dropped
            continue
        if inexact:
            yield _f("MEM009", INDEX_NAME, n, f"link to {raw} finds {rel} only when case is ignored; "
                                              "it breaks on case-sensitive file systems", col)
        linked.add(rel)
        ent = entry_lines.get(n)
        if ent is not None and ent.is_local:
            if rel in first_entry:
                yield _f("MEM011", INDEX_NAME, n, f"entry {ent.title!r} links to {rel}, already linked at "
                                                  f"line {first_entry[rel]}", fixable=True)
            else:
                first_entry[rel] = n
    for t in root_topics:
        if t.rel not in linked:
            why = not_a_memory(t)
            if why is not None:
                yield _f("MEM015", t.rel, 1, f"not linked from {INDEX_NAME} and not a memory: {why}; "
                                             "`memd rebuild` never indexes it: move it out of the memory folder")
            elif not is_utf8_name(t.rel):
                yield _f("MEM010", t.rel, 1, f"not linked from {INDEX_NAME}, and cannot be: its name is not UTF-8 "
                                             f"({INDEX_NAME} is UTF-8 text); rename the file")
            else:
                yield _f("MEM010", t.rel, 1, f"not linked from {INDEX_NAME}; a session never learns it exists",
                         fixable=True)


def _topic_links(rec: FileRecord, snap: FolderSnapshot) -> Iterable[Finding]:
    text = rec.text or ""
    if "](" not in text:
        return
    base = posixpath.dirname(rec.rel)
    existing = snap.by_rel
    folded = snap.folded
    for n, ln in enumerate(index.split_lines(text), 1):
        if "](" not in ln:
            continue
        for m in LINK.finditer(mask_code(ln)):
            raw = m.group(1)
            rel, leaves = link_target(raw, base)
            if rel is None:
                continue
            if leaves:
                yield _f("MEM007", rec.rel, n, f"link to {raw} leaves the memory folder", m.start(1) + 1)
            elif rel.endswith(".md") and resolve_link(rel, existing, folded)[0] is None:
                yield _f("MEM006", rec.rel, n, f"link to {raw}: no such file in the memory folder", m.start(1) + 1)


# --------------------------------------------------------------------------- frontmatter


def _frontmatter_checks(rec: FileRecord, b: Limits) -> Iterable[Finding]:
    tf = rec.topic
    if tf is None:
        return
    if not tf.has_frontmatter:
        yield _f("MEM020", rec.rel, 1, "no frontmatter: recall sees no name, description or type")
        return
    if tf.error:
        yield _f("MEM021", rec.rel, 1, f"frontmatter cannot be read: {tf.error}")
        return
    if tf.yaml_error:
        m = re.search(r"\(line (\d+)\)", tf.yaml_error)  # load_yaml reports lines of the file
        hint = ("quote values that contain ': '" if "mapping values" in tf.yaml_error
                else "memory needs no YAML anchors or aliases" if "are not allowed" in tf.yaml_error
                else "its keys were read line by line")
        yield _f("MEM022", rec.rel, int(m.group(1)) if m else 1,
                 f"frontmatter is not valid YAML ({tf.yaml_error}); {hint}")
    if tf.frontmatter_lines > b.max_frontmatter_lines:
        yield _f("MEM027", rec.rel, 1, f"frontmatter is {tf.frontmatter_lines} lines; recall reads only the "
                                       f"first {b.max_frontmatter_lines}")
    if tf.description is None:
        yield _f("MEM023", rec.rel, 1, "no description: recall selects memories by description alone")
    t = tf.type
    if t is None or t == "":
        yield _f("MEM024", rec.rel, 1, f"no type (one of {', '.join(frontmatter.MEMORY_TYPES)})")
    elif t not in frontmatter.MEMORY_TYPES:
        yield _f("MEM025", rec.rel, 1, f"type {t!r} is not one of {', '.join(frontmatter.MEMORY_TYPES)}")
    if tf.name is None:
        yield _f("MEM026", rec.rel, 1, "no name in the frontmatter")


# --------------------------------------------------------------------------- duplicates

SHINGLE = 3
MAX_WORDS = 3000  # words of a body compared (bounds the cost of one file)
MAX_DF = 12  # shingles shared by more files than this are boilerplate, not evidence
SMALL_FOLDER = 24  # up to this many bodies, every pair is compared
MIN_WORDS = 8  # bodies shorter than this are not compared
NEAR = 0.9  # difflib ratio of the word sequences counted as near-identical


def _claimed(seen: dict[str, FileRecord], key: str, rec: FileRecord) -> FileRecord | None:
    """The file that already holds key, or None after recording rec as its holder."""
    first = seen.setdefault(key, rec)
    return None if first is rec else first


def _duplicates(topics: list[FileRecord]) -> Iterable[Finding]:
    by_name: dict[str, FileRecord] = {}
    by_desc: dict[str, FileRecord] = {}
    bodies: list[tuple[FileRecord, list[str]]] = []
    by_body: dict[str, FileRecord] = {}
    for rec in topics:
        tf = rec.topic
        if tf is None:
            continue
        if tf.name and (other := _claimed(by_name, " ".join(tf.name.casefold().split()), rec)) is not None:
            yield _f("MEM012", rec.rel, 1, f"name {tf.name!r} is also the name of {other.rel}")
        if tf.description and (other := _claimed(by_desc, " ".join(tf.description.casefold().split()),
                                                  rec)) is not None:
            yield _f("MEM013", rec.rel, 1, f"same description as {other.rel}")
        words = tf.body.casefold().split()[:MAX_WORDS]  # punctuation stays on its word: cheap, and good enough
        if len(words) < MIN_WORDS:
            continue  # "TODO" twice is not a duplicate memory
        if (other := _claimed(by_body, " ".join(words), rec)) is not None:
            yield _f("MEM014", rec.rel, 1, f"same body as {other.rel}")
            continue
        bodies.append((rec, words))
    yield from _near_bodies(bodies)


def _shingles(words: list[str]) -> frozenset[int]:
    hashes = map(hash, zip(*(words[k:] for k in range(SHINGLE)), strict=False))
    # past 60 words a quarter of the shingles (chosen by hash, so the same ones in every file)
    # is evidence enough
    return frozenset(filterfalse((3).__and__, hashes)) if len(words) > 60 else frozenset(hashes)


def _candidates(bodies: list[tuple[FileRecord, list[str]]]) -> list[tuple[int, int]]:
    """Pairs of bodies worth comparing. A few bodies: every pair. Many: pairs that share shingles,
    found through an inverted index (boilerplate shingles shared by many files are ignored)."""
    if len(bodies) <= SMALL_FOLDER:
        return [(i, j) for i in range(len(bodies)) for j in range(i + 1, len(bodies))]
    sh = [_shingles(w) for _, w in bodies]
    postings: dict[int, list[int]] = {}
    for i, s in enumerate(sh):
        for h in s:
            postings.setdefault(h, []).append(i)
    # postings list their bodies in ascending order, so each pair comes out as (i, j) with i < j
    shared = Counter(chain.from_iterable(combinations(docs, 2) for docs in postings.values()
                                         if 2 <= len(docs) <= MAX_DF))
    return sorted(k for k, n in shared.items() if n >= 0.5 * min(len(sh[k[0]]), len(sh[k[1]])))


def _near_bodies(bodies: list[tuple[FileRecord, list[str]]]) -> Iterable[Finding]:
    """Near-identical bodies: candidate pairs of similar length, confirmed by difflib."""
    reported: set[int] = set()
    bags: dict[int, Counter[str]] = {}
    kinds: dict[int, frozenset[str]] = {}
    for i, j in _candidates(bodies):
        wi, wj = bodies[i][1], bodies[j][1]
        small, big = sorted((len(wi), len(wj)))
        if j in reported or small < NEAR * big:
            continue
        # a bound first, from the distinct words alone: each word of one body missing from the other
        # costs at least one match
        si = kinds.get(i) or kinds.setdefault(i, frozenset(wi))
        sj = kinds.get(j) or kinds.setdefault(j, frozenset(wj))
        if 2.0 * min(len(wi) - len(si - sj), len(wj) - len(sj - si)) / (len(wi) + len(wj)) < NEAR:
            continue
        # difflib's quick_ratio (matches counted as a multiset), with each bag of words built once
        bi = bags.get(i) or bags.setdefault(i, Counter(wi))
        bj = bags.get(j) or bags.setdefault(j, Counter(wj))
        if len(bi) > len(bj):
            bi, bj = bj, bi
        matches = sum(min(c, bj[w]) for w, c in bi.items() if w in bj)
        if 2.0 * matches / (len(wi) + len(wj)) < NEAR:
            continue
        from difflib import SequenceMatcher  # only for bodies that passed the cheap bounds

        ratio = SequenceMatcher(None, wi, wj, autojunk=False).ratio()
        if ratio >= NEAR:
            reported.add(j)
            yield _f("MEM014", bodies[j][0].rel, 1,
                     f"body is {ratio:.0%} the same as {bodies[i][0].rel}; merge them")


# --------------------------------------------------------------------------- recall's file limit


def _too_many(snap: FolderSnapshot, b: Limits) -> Iterable[Finding]:
    topics = list(snap.topics())
    if len(topics) <= b.max_topic_files:
        return
    ordered = sorted(topics, key=lambda t: (-(t.mtime or 0.0), t.rel))
    unseen = ordered[b.max_topic_files:]
    yield _f("MEM030", ".", 1, f"{len(topics)} topic files; recall scans only the newest "
                               f"{b.max_topic_files}, so {len(unseen)} are never seen")
    for t in unseen:
        yield _f("MEM031", t.rel, 1, f"recall never sees this file (older than the newest {b.max_topic_files})")


# --------------------------------------------------------------------------- secrets


def _secret_findings(rec: FileRecord, hits: list[secrets.SecretHit]) -> Iterable[Finding]:
    where = "team memory (shared with others)" if rec.team else "memory"
    for hit in hits:
        yield _f("MEM050", rec.rel, hit.line, f"{hit.kind} at column {hit.column} (value not shown): "
                                              f"secrets must not be kept in {where}", hit.column)
