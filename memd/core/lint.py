"""The memory-folder linter: findings with stable codes, like ruff's (pure: snapshot in, findings out).

Each code has one severity and a short name (``CODES``); docs/check.md describes them all.
Paths are relative to the memory folder ("." for the folder itself); lines are 1-based (1 for
findings about a whole file). Messages name what is wrong and where, never a secret's value.

Scope: the budget, orphan and dangling-link checks apply to the user's own index (MEMORY.md and the
files beside it). ``team/`` is synced from a server and read-only: its files get the per-file checks
(encoding, frontmatter, dates, secrets with personal data) but no index checks.
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Iterable

from memd.config import BudgetConfig
from memd.core import fastscan, frontmatter, index, secrets
from memd.core.files import INDEX_NAME, FileRecord, FolderSnapshot
from memd.core.findings import CODES, ERROR, INFO, SEVERITIES, WARNING, Code, Finding, counts, sort_key

__all__ = ["CODES", "ERROR", "INFO", "SEVERITIES", "WARNING", "Code", "Finding", "counts", "lint", "sort_key"]


def _f(code: str, path: str, line: int, message: str) -> Finding:
    return Finding(code, CODES[code].severity, path, line, message)


def lint(snap: FolderSnapshot, budget: BudgetConfig | None = None, *, team_pii: bool = True) -> list[Finding]:
    """Every finding for one memory folder, sorted (folder, MEMORY.md, then files by path and line)."""
    b = budget or BudgetConfig()
    out: list[Finding] = []
    if not snap.exists:
        return out
    if snap.problem:
        return [_f("MEM071", ".", 1, f"the memory folder cannot be read: {snap.problem}")]
    if snap.truncated:
        out.append(_f("MEM072", ".", 1, "the memory folder has too many entries or is nested too deeply; "
                                        "only part of it was checked"))
    for rec in snap.files:
        out.extend(_file_problems(rec))
    out.extend(_index_checks(snap, b))
    topics = [t for t in snap.topics() if t.text is not None]
    for rec in topics:
        out.extend(_frontmatter_checks(rec, b))
        out.extend(_topic_links(rec, snap))
    out.extend(_duplicates(topics))
    out.extend(_too_many(snap, b))
    texts = [rec for rec in snap.files if rec.text is not None]
    for rec in texts:
        out.extend(relative_dates(rec))
    for strict in (False, True):
        group = [rec for rec in texts if rec.team == strict]
        scanned = fastscan.scan_many([r.text or "" for r in group], strict=strict, pii=team_pii)
        for rec, hits in zip(group, scanned, strict=True):
            out.extend(_secret_findings(rec, hits))
    out.sort(key=sort_key)
    return out


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


# --------------------------------------------------------------------------- the index

_LINK = re.compile(r"(?<!!)\[(?:[^\]\\]|\\.)*\]\((<[^>]*>|[^)\s]*)(?:\s+\"[^\"]*\")?\)")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.\-]*:")


def link_target(raw: str, base_dir: str) -> tuple[str | None, bool]:
    """(path relative to the memory folder, leaves_folder) of a local link; (None, False) otherwise."""
    t = raw[1:-1] if raw.startswith("<") and raw.endswith(">") else raw
    t = t.split("#", 1)[0].split("?", 1)[0]
    if not t or _SCHEME.match(t):
        return None, False
    from urllib.parse import unquote

    t = unquote(t)
    if t.startswith(("/", "~")):
        return t, True
    joined = posixpath.normpath(posixpath.join(base_dir, t))
    if joined == ".." or joined.startswith("../"):
        return joined, True
    return joined, False


def index_links(idx: index.Index) -> list[tuple[int, str, str | None, bool]]:
    """Every markdown link of the index outside frontmatter and comments:
    (line, raw target, path relative to the memory folder, leaves_folder)."""
    out: list[tuple[int, str, str | None, bool]] = []
    for n, ln in enumerate(idx.lines, 1):
        if n in idx.masked or "](" not in ln:
            continue
        for m in _LINK.finditer(ln):
            rel, leaves = link_target(m.group(1), "")
            out.append((n, m.group(1), rel, leaves))
    return out


def _index_checks(snap: FolderSnapshot, b: BudgetConfig) -> Iterable[Finding]:
    root_topics = [t for t in snap.topics() if not t.team]
    rec = snap.index
    if rec is None:
        if root_topics:
            yield _f("MEM070", ".", 1, f"no {INDEX_NAME}: {len(root_topics)} topic file(s) are not indexed; "
                                       "run `memd rebuild` to write one")
        return
    if rec.text is None:
        return
    text = rec.text
    budget = index.measure(text, b.max_lines, b.max_chars, b.warn_ratio)
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
    idx = index.parse(text)
    for n, ln in enumerate(idx.lines, 1):
        if n not in idx.masked and len(ln) > b.max_index_line:
            yield _f("MEM004", INDEX_NAME, n, f"line is {len(ln)} characters (limit {b.max_index_line}); "
                                              "an index line is a title and a short hook")
    existing = {f.rel for f in snap.files}
    linked: set[str] = set()
    first_entry: dict[str, int] = {}
    entry_lines = {e.line: e for e in idx.entries}
    for n, raw, rel, leaves in index_links(idx):
        if rel is None:
            continue
        if leaves:
            yield _f("MEM007", INDEX_NAME, n, f"link to {raw} leaves the memory folder")
            continue
        if rel not in existing and not _is_folder(rel, existing):
            if rel.lower().endswith(".md"):  # memd lists only .md files: other targets are not judged
                yield _f("MEM005", INDEX_NAME, n, f"link to {raw}: no such file in the memory folder")
            continue
        linked.add(rel)
        ent = entry_lines.get(n)
        if ent is not None and ent.is_local:
            if rel in first_entry:
                yield _f("MEM011", INDEX_NAME, n, f"entry {ent.title!r} links to {rel}, already linked at "
                                                  f"line {first_entry[rel]}")
            else:
                first_entry[rel] = n
    for t in root_topics:
        if t.rel not in linked:
            yield _f("MEM010", t.rel, 1, f"not linked from {INDEX_NAME}; a session never learns it exists")


def _is_folder(rel: str, existing: set[str]) -> bool:
    prefix = rel.rstrip("/") + "/"
    return any(e.startswith(prefix) for e in existing)


def _topic_links(rec: FileRecord, snap: FolderSnapshot) -> Iterable[Finding]:
    text = rec.text or ""
    if "](" not in text:
        return
    base = posixpath.dirname(rec.rel)
    existing = snap.by_rel
    for n, ln in enumerate(index.split_lines(text), 1):
        if "](" not in ln:
            continue
        for m in _LINK.finditer(_mask_code(ln)):
            raw = m.group(1)
            rel, leaves = link_target(raw, base)
            if rel is None:
                continue
            if leaves:
                yield _f("MEM007", rec.rel, n, f"link to {raw} leaves the memory folder")
            elif rel.endswith(".md") and rel not in existing:
                yield _f("MEM006", rec.rel, n, f"link to {raw}: no such file in the memory folder")


# --------------------------------------------------------------------------- frontmatter


def _frontmatter_checks(rec: FileRecord, b: BudgetConfig) -> Iterable[Finding]:
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
        yield _f("MEM022", rec.rel, 1, f"frontmatter is not valid YAML ({tf.yaml_error}); "
                                       "quote values that contain ': '")
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

_WORD = re.compile(r"\w+")
SHINGLE = 3
MAX_WORDS = 3000  # words of a body compared (bounds the cost of one file)
MAX_DF = 12  # shingles shared by more files than this are boilerplate, not evidence
SMALL_FOLDER = 24  # up to this many bodies, every pair is compared
MIN_WORDS = 8  # bodies shorter than this are not compared
NEAR = 0.9  # difflib ratio of the word sequences counted as near-identical


def _duplicates(topics: list[FileRecord]) -> Iterable[Finding]:
    by_name: dict[str, FileRecord] = {}
    by_desc: dict[str, FileRecord] = {}
    bodies: list[tuple[FileRecord, list[str]]] = []
    by_body: dict[str, FileRecord] = {}
    for rec in topics:
        tf = rec.topic
        if tf is None:
            continue
        if tf.name:
            key = " ".join(tf.name.casefold().split())
            if key in by_name:
                yield _f("MEM012", rec.rel, 1, f"name {tf.name!r} is also the name of {by_name[key].rel}")
            else:
                by_name[key] = rec
        if tf.description:
            key = " ".join(tf.description.casefold().split())
            if key in by_desc:
                yield _f("MEM013", rec.rel, 1, f"same description as {by_desc[key].rel}")
            else:
                by_desc[key] = rec
        words = _WORD.findall(tf.body.casefold())[:MAX_WORDS]
        if len(words) < MIN_WORDS:
            continue  # "TODO" twice is not a duplicate memory
        norm = " ".join(words)
        if norm in by_body:
            yield _f("MEM014", rec.rel, 1, f"same body as {by_body[norm].rel}")
            continue
        by_body[norm] = rec
        bodies.append((rec, words))
    yield from _near_bodies(bodies)


def _shingles(words: list[str]) -> frozenset[int]:
    hashes = map(hash, zip(*(words[k:] for k in range(SHINGLE)), strict=False))
    # past 60 words a quarter of the shingles (chosen by hash, so the same ones in every file)
    # is evidence enough
    return frozenset(h for h in hashes if not h & 3) if len(words) > 60 else frozenset(hashes)


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
    shared: dict[tuple[int, int], int] = {}
    for docs in postings.values():
        if len(docs) < 2 or len(docs) > MAX_DF:
            continue
        for a in range(len(docs)):
            for c in range(a + 1, len(docs)):
                k = (docs[a], docs[c])
                shared[k] = shared.get(k, 0) + 1
    return sorted(k for k, n in shared.items() if n >= 0.5 * min(len(sh[k[0]]), len(sh[k[1]])))


def _near_bodies(bodies: list[tuple[FileRecord, list[str]]]) -> Iterable[Finding]:
    """Near-identical bodies: candidate pairs of similar length, confirmed by difflib."""
    from difflib import SequenceMatcher

    reported: set[int] = set()
    for i, j in _candidates(bodies):
        wi, wj = bodies[i][1], bodies[j][1]
        small, big = sorted((len(wi), len(wj)))
        if j in reported or small < NEAR * big:
            continue
        sm = SequenceMatcher(None, wi, wj, autojunk=False)
        if sm.quick_ratio() < NEAR:
            continue
        ratio = sm.ratio()
        if ratio >= NEAR:
            reported.add(j)
            yield _f("MEM014", bodies[j][0].rel, 1,
                     f"body is {ratio:.0%} the same as {bodies[i][0].rel}; merge them")


# --------------------------------------------------------------------------- recall's file limit


def _too_many(snap: FolderSnapshot, b: BudgetConfig) -> Iterable[Finding]:
    topics = list(snap.topics())
    if len(topics) <= b.max_topic_files:
        return
    ordered = sorted(topics, key=lambda t: (-(t.mtime or 0.0), t.rel))
    unseen = ordered[b.max_topic_files:]
    yield _f("MEM030", ".", 1, f"{len(topics)} topic files; recall scans only the newest "
                               f"{b.max_topic_files}, so {len(unseen)} are never seen")
    for t in unseen:
        yield _f("MEM031", t.rel, 1, f"recall never sees this file (older than the newest {b.max_topic_files})")


# --------------------------------------------------------------------------- relative dates

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
_DATE_NEEDLES = ("yesterday", "today", "tomorrow", "tonight", "ago", "day", "week", "month", "year", "night",
                 "morning", "afternoon", "evening", "昨", "今", "明", "前天", "后天", "上", "下", "本", "这",
                 "去年", "先", "来")
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


_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _mask_code(line: str) -> str:
    if "`" not in line:
        return line
    return _CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)


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


def relative_dates(rec: FileRecord) -> list[Finding]:
    text = rec.text or ""
    low = text.lower()
    if not any(n in low for n in _DATE_NEEDLES) or not _relative().search(low):
        return []
    hit_lines: set[int] | None = None
    if len(low) == len(text):  # one pass over the text finds the lines worth a closer look
        hit_lines, pos, line_no = set(), 0, 1
        for hit in _relative().finditer(low):
            line_no += low.count("\n", pos, hit.start())
            pos = hit.start()
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
        line = _mask_code(raw)
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
                                                "wrong tomorrow (write e.g. 2026-03-05)"))
    return out


# --------------------------------------------------------------------------- secrets


def _secret_findings(rec: FileRecord, hits: list[secrets.SecretHit]) -> Iterable[Finding]:
    where = "team memory (shared with others)" if rec.team else "memory"
    for hit in hits:
        yield _f("MEM050", rec.rel, hit.line, f"{hit.kind} at column {hit.column} (value not shown): "
                                              f"secrets must not be kept in {where}")
