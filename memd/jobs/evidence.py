"""The evidence of one project's memory folder, gathered for the dream, ``memd status`` and the viewer
(issue 31): the candidates ``memd.core.evidence`` computes from the folder's files (possible duplicates,
passed dates, entries past the cut) and the use figures the scan keeps in the state (``memory_use``:
index loads, reads, recalls, writes), giving the memories no session used in the last N index loads.

No model is called here; the folder is read once, each file up to ``TEXT_BYTES`` (a duplicate shows in
its head). ``render`` is the dream's section of it, bounded by ``dream.evidence_max_chars``: both sides
of each pair and each dated memory, whole up to ``SIDE_CHARS``; ``due_dates`` is the gate's part: the
passed dates no dream has been shown yet (``note_dates`` records them after a dream ran).
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memd.core import evidence as ev

if TYPE_CHECKING:
    from memd.config import Config
    from memd.state import StateStore

TEXT_BYTES = 16_384  # of each file, for the similarity and the dates
SIDE_CHARS = 1_500  # of each file shown in a pair or as a dated memory
DATES_KEY = "dream.dates_seen."  # + project: the passed dates a dream has been shown (JSON list)


@dataclass
class Evidence:
    """What memd knows of a folder before any model reads it."""

    candidates: ev.Candidates
    uses: dict[str, ev.Use] = field(default_factory=dict)
    loads: list[float] = field(default_factory=list)  # when each session that loaded the index did, newest first
    texts: dict[str, str] = field(default_factory=dict)  # rel -> the text read (bounded)
    indexed: list[str] = field(default_factory=list)  # the topic files the index links, in its order
    topics: int = 0
    today: str = ""

    def use_line(self, rel: str) -> str:
        """A manifest row's use figures ("" when memd has seen no session load the index yet)."""
        if not self.loads:
            return ""
        u = self.uses.get(rel)
        if u is None or not (u.used or u.weak):
            return f"unused in {len(self.loads)} index loads"
        parts = [f"{what} {n}" for n, what in ((u.reads, "read"), (u.recalls, "recalled"), (u.writes, "written"))
                 if n]
        if u.weak:
            parts.append(f"shell {u.weak}")
        last = f", last {time.strftime('%Y-%m-%d', time.localtime(u.last_seen))}" if u.last_seen else ""
        return ", ".join(parts) + last


def uses_of(state: StateStore | None, project: str) -> tuple[dict[str, ev.Use], list[float]]:
    if state is None:
        return {}, []
    uses = {rel: ev.Use(d["reads"], d["recalls"], d["writes"], d["weak"], d["last_seen"])
            for rel, d in state.memory_uses(project).items()}
    return uses, state.index_loads(project)


def gather(memory_dir: Path, config: Config, state: StateStore | None, project: str, *, now: float,
           live: Path | None = None, dates_only: bool = False) -> Evidence:
    """The evidence of the folder at ``memory_dir`` (a staging copy: ``live`` gives the live folder's
    mtimes, which date the files for the unused rule); ``dates_only``: the passed dates alone (the
    nightly gate's cheap pass)."""
    from memd.core import frontmatter
    from memd.core.paths import INDEX_NAME
    from memd.memfolder.read import decode, read_bounded
    from memd.memfolder.walk import list_files

    today = time.strftime("%Y-%m-%d", time.localtime(now))
    topics = list(list_files(memory_dir, config.budget.max_file_bytes).topics())
    mtimes: dict[str, float] = {f.rel: f.mtime or 0.0 for f in topics}
    if live is not None:
        mtimes.update((f.rel, f.mtime or 0.0) for f in list_files(live, config.budget.max_file_bytes).topics())
    docs: list[ev.Doc] = []
    texts: dict[str, str] = {}
    dated: list[ev.DatedMemory] = []
    for f in topics:
        r = read_bounded(f.path, TEXT_BYTES, hash=False, cut=True)
        if r.data is None:
            continue
        text = decode(r)
        texts[f.rel] = text
        tf = frontmatter.parse(text)
        data = tf.data if tf.has_frontmatter and tf.data else {}
        desc = data.get("description") if isinstance(data, dict) else None
        doc = ev.Doc(f.rel, " ".join(str(desc).split()) if desc else "", tf.body if tf.has_frontmatter else text)
        docs.append(doc)
        if not f.rel.startswith("team/"):
            dated.extend(ev.passed_dates(doc, today))
    if dates_only:
        return Evidence(ev.Candidates(dated=dated), texts=texts, topics=len(topics), today=today)
    pairs = [p for p in ev.near_duplicates(docs) if not (p.a.startswith("team/") and p.b.startswith("team/"))]
    try:
        index_text = (memory_dir / INDEX_NAME).read_text(encoding="utf-8", errors="replace")
    except OSError:
        index_text = ""
    b = config.budget
    uses, loads = uses_of(state, project)
    own = {rel: t for rel, t in mtimes.items() if not rel.startswith("team/") and rel in texts}
    unused = ev.never_used(uses, own, loads, config.dream.unused_after_loads)
    cands = ev.Candidates(pairs, dated, ev.past_cut(index_text, b.max_lines, b.max_chars), unused)
    from memd.core import index as mindex

    indexed = list(dict.fromkeys(e.file for e in mindex.parse(index_text).entries if e.file in texts))
    return Evidence(cands, uses, loads, texts, indexed, len(topics), today)


def _side(rel: str, text: str) -> str:
    body = text if len(text) <= SIDE_CHARS else text[:SIDE_CHARS] + "\n... (cut: view the rest)"
    return f'<file path="/memories/{rel}">\n{body.rstrip()}\n</file>'


def render(e: Evidence, max_chars: int) -> str:
    """The dream's section of the evidence (bounded by ``max_chars``; "" when there is none)."""
    c = e.candidates
    if not c.count or max_chars <= 0:
        return ""
    out = ["## Evidence memd computed from the whole folder (no model involved): weigh these first",
           "Candidates only: decide each on what the files say (merge, delete with its index line, fix, or keep)."]
    left = max_chars
    shown: set[str] = set()

    def add(block: str) -> bool:
        nonlocal left
        if len(block) > left:
            return False
        left -= len(block)
        out.append(block)
        return True

    if c.pairs:
        out.append("### Possible duplicates (similarity 0-1; the words both say most), each with both files")
        for p in c.pairs:
            head = f"- /memories/{p.a} and /memories/{p.b}: {p.score:.2f} ({', '.join(p.shared)})"
            sides = [_side(r, e.texts.get(r, "")) for r in (p.a, p.b) if r not in shown]
            if not add("\n".join([head, *sides])):
                add(head + " (view both)")
                continue
            shown.update((p.a, p.b))
    if c.dated:
        out.append(f"### Memories stating a date that has passed (today is {e.today})")
        for d in c.dated:
            head = f'- /memories/{d.rel}: "{d.phrase}" ({d.date} has passed)'
            side = [] if d.rel in shown else [_side(d.rel, e.texts.get(d.rel, ""))]
            if add("\n".join([head, *side])):
                shown.add(d.rel)
            else:
                add(head)
    if c.past_cut:
        # the index must lose lines: which ones is decided by use, not by position (the last lines are
        # the newest memories, the ones a plain cut would take)
        order = ev.least_used(e.indexed, e.uses)[:max(2 * len(c.past_cut), 20)]
        add(f"### The index is past its cut: {len(c.past_cut)} entries never reach a session. Its entries least "
            "used first (merge or delete these before any other; a moved entry is no loss)\n"
            + "\n".join(f"- /memories/{r}: {e.use_line(r) or 'no use recorded'}" for r in order))
    if c.unused:
        add(f"### Memories no session used in the last {min(len(e.loads), 10**9)} index loads "
            f"({len(c.unused)}): still true and worth keeping, or stale?\n"
            + ", ".join(f"/memories/{r}" for r in c.unused[:60])
            + (f" and {len(c.unused) - 60} more" if len(c.unused) > 60 else ""))
    return "\n".join(out) + "\n"


def manifest_with_uses(root: Path, config: Config, e: Evidence, *, live: Path | None = None) -> str:
    """The model jobs' manifest, each row with its use figures."""
    from memd.memfolder.manifest import build, live_mtimes, render_for_model

    b = config.budget
    mtimes = live_mtimes(live, b.max_file_bytes) if live is not None else None
    m = build(root, max_files=b.max_topic_files, max_lines=b.max_frontmatter_lines, max_bytes=b.max_file_bytes,
              mtimes=mtimes)
    return render_for_model(m, uses={x.name: e.use_line(x.name) for x in m.entries})


# ----------------------------------------------------------------------------- the "due once" rule


def _date_keys(c: ev.Candidates) -> list[str]:
    return sorted({f"{d.rel}\0{d.date}" for d in c.dated})


def due_dates(state: StateStore | None, project: str, memory_dir: Path, config: Config, now: float) -> list[str]:
    """The passed dates (``rel: date``) no dream has been shown yet: they make the project due once."""
    import json

    e = gather(memory_dir, config, None, project, now=now, dates_only=True)
    seen: set[str] = set()
    if state is not None:
        try:
            seen = set(json.loads(state.get(DATES_KEY + project) or "[]"))
        except ValueError:
            seen = set()
    return [k.replace("\0", ": ") for k in _date_keys(e.candidates) if _digest(k) not in seen]


def _digest(k: str) -> str:
    return hashlib.sha256(k.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def note_dates(state: StateStore | None, project: str, shown: ev.Candidates) -> None:
    """After a dream the model ran: the passed dates it was shown are seen (a dream that kept such a
    memory is not paid for again every night; a new date, or the same memory dated again, is new)."""
    import json

    if state is None:
        return
    keys = sorted({_digest(k) for k in _date_keys(shown)})
    if keys:
        state.set(DATES_KEY + project, json.dumps(keys))
    else:
        state.delete(DATES_KEY + project)


SUMMARY_KEY = "evidence.summary."  # + project: the last summary and the folder signature it was computed for


def summary(memory_dir: Path, config: Config, state: StateStore | None, project: str, now: float) -> dict[str, Any]:
    """What ``memd status`` and the viewer show of a project's evidence: the memories unused in the last N
    index loads and the candidates waiting for the dream. Computing it reads every topic file, so it is
    kept in the state with the folder's signature (each file's name, size and mtime), the day and the
    number of index loads, and computed again only when one of them changed."""
    import json

    from memd.memfolder.walk import list_files

    sig = hashlib.sha256()
    for f in sorted(list_files(memory_dir, config.budget.max_file_bytes).memory_files(), key=lambda f: f.rel):
        sig.update(f"{f.rel}\0{f.size}\0{f.mtime}\n".encode("utf-8", "surrogatepass"))
    loads = state.index_loads(project) if state is not None else []
    key = f"{sig.hexdigest()[:20]}:{time.strftime('%Y-%m-%d', time.localtime(now))}:{len(loads)}"
    if state is not None:
        try:
            got = json.loads(state.get(SUMMARY_KEY + project) or "{}")
        except ValueError:
            got = {}
        if isinstance(got, dict) and got.get("key") == key and isinstance(got.get("summary"), dict):
            return dict(got["summary"])
    e = gather(memory_dir, config, state, project, now=now)
    c = e.candidates
    out = {"loads": len(e.loads), "unused": c.unused, "unused_after": config.dream.unused_after_loads,
           "pairs": [[p.a, p.b, p.score] for p in c.pairs], "dated": [[d.rel, d.date] for d in c.dated],
           "past_cut": [x.file for x in c.past_cut],
           "waiting": len(c.pairs) + len(c.dated) + len(c.past_cut) + len(c.unused)}
    if state is not None:
        with contextlib.suppress(Exception):  # a busy state: the summary is shown, not kept
            state.set(SUMMARY_KEY + project, json.dumps({"key": key, "summary": out}))
    return out


def summary_line(project: str, s: dict[str, Any]) -> str:
    """One line of ``memd status`` ("" when there is nothing to say)."""
    parts = []
    if s.get("pairs"):
        parts.append(f"{len(s['pairs'])} possible duplicate pair(s)")
    if s.get("dated"):
        parts.append(f"{len(s['dated'])} memor{'ies' if len(s['dated']) != 1 else 'y'} whose date has passed")
    if s.get("past_cut"):
        parts.append(f"{len(s['past_cut'])} index entr{'ies' if len(s['past_cut']) != 1 else 'y'} past the cut")
    unused = s.get("unused") or []
    if unused:
        shown = ", ".join(unused[:3]) + (f" and {len(unused) - 3} more" if len(unused) > 3 else "")
        parts.append(f"{len(unused)} memor{'ies' if len(unused) != 1 else 'y'} unused in the last "
                     f"{s.get('unused_after')} sessions that loaded the index ({shown})")
    if not parts:
        return ""
    return f"  {project}: waiting for the dream: " + "; ".join(parts) + "\n"
