"""Dream: the nightly consolidation of one project's memory (one project per call).

The gates (hours, sessions, the consolidate lock) are the runner's (``memd.jobs.runner``). Here:

- Nothing changed since the last consolidation (no session touched, no memory file written, no
  memory write seen in a transcript): the model is not called (``noop``). ``--force`` runs anyway.
- What changed (``dream.scope = "changed"``, the default): "since the last dream" is the newest complete
  dream in memd's history (``since_last_dream``: its "after" commit, compared byte for byte with the live
  folder, so Claude Code's writes, sync, an undo count and an identical rewrite does not). The dream is
  handed the text of those files up front (``dream.changed_max_chars``), the rest by manifest only; no
  file changed and a healthy index (``index_healthy``): the model is not called. ``scope = "all"`` is the
  old dream (names of the files written since, every body read on request).
- No API key: the deterministic index rebuild only (``maintenance.rebuild_project``); the outcome
  is ``skipped`` (no consolidation happened: gates and the lock's mtime stay) and says that model
  work is off.
- Otherwise the dream model works on a staging copy in four phases (orient, gather, consolidate,
  prune and index; ``memd/prompts/dream.md``), with the confined memory tool and a read-only
  transcript search, for at most ``dream.max_tool_turns`` calls. Orientation is handed in up front
  (the index, a manifest of topic files with type, description, size and date, the recent catch-up
  runs, the sessions since the last dream), so the model reads files only when it needs their body
  and the input stays bounded by the folder, not by the volume of transcripts.
- The model's work is the edit step of ``memd.apply.run`` (stage, edit, rebuild, guard, apply or
  review); ``memd.jobs.modelrun.record`` turns its result into the outcome. A model stopped at a cap
  (its calls, the run's tool calls, its searches, ``dream.max_input_tokens`` checked before every
  call like the catch-up's token cap) makes a ``partial`` run: applied only when the
  staging copy is consistent and passes the guards, else nothing; never a consolidation.
- The prompt states the budgets with the configured numbers; the CLAUDE.md files of the newest
  session's working folder are handed in (bounded, redacted) so the model does not duplicate them.
- Sync's conflict blocks (``memd.core.conflict``, issue 21): the files holding one open the material,
  whole, with line numbers; the model resolves a block with an ordinary edit and says what it
  decided with ``resolve_conflict`` (``memd.llm.resolvetool``); the guard lets a block's words go
  only with that decision (``memd.core.guard.block_reasons``); the outcome's details, message and
  history say per block what was decided. A dream the model ran settles the conflicts sync kept for
  it (``memd.sync.evidence``) whose file holds no open block after it.
- Declared forgetting (issue 31, ``memd.core.declared``): the model forgets a memory, or merges one into
  another, with ``forget_memory`` (``memd.llm.forgettool``) and a reason; the guard lets the memory's
  index entry go with it and refuses silent loss; the outcome's details and message, the history and
  the log (``dream.forgotten``, no reason) say what was forgotten.
- Whether a dream counts as a consolidation is the runner's one rule
  (``memd.jobs.counts_as_consolidation``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memd import apply as ap
from memd.jobs import JobContext, Outcome, ProjectOutcome, note_consolidation
from memd.jobs import modelrun as mr

if TYPE_CHECKING:
    from memd.layout import Project
    from memd.llm.batch import BatchNote

BASE_SLACK_S = 900.0  # a dream's "after" commit and its consolidation mark are seconds apart
MAX_INDEX_CHARS = 30_000  # the index as handed in (the budget is 25,000; an over-budget one is cut)


def changed_since(jc: JobContext, project: Project, since: float | None) -> str | None:
    """Why the project needs a dream (None: nothing changed since ``since``)."""
    if since is None:
        return "never consolidated"
    if jc.state is not None:
        n = jc.state.sessions_touched_since(project.name, since)
        if n:
            return f"{n} session(s) since the last dream"
        for t in jc.state.transcripts(project.name):
            if t.memory_write_seen_at is not None and t.memory_write_seen_at > since:
                return "memory written in a session since the last dream"
    from memd.memfolder.walk import list_files

    for f in list_files(project.memory_dir).memory_files():
        if f.mtime is not None and f.mtime > since:
            return f"{f.rel} changed since the last dream"
    return None


def dream_project(jc: JobContext, project: Project) -> ProjectOutcome:
    """One project's dream (see the module doc)."""
    from memd.jobs import evidence as E
    from memd.llm import client as llm

    cfg = jc.config
    now = jc.clock.time()
    last = jc.state.project(project.name).last_consolidation if jc.state is not None else None
    why = changed_since(jc, project, last)
    # a memory whose stated date has passed makes the project due once (``memd.jobs.evidence.due_dates``)
    dates = E.due_dates(jc.state, project.name, project.memory_dir, cfg, now) if project.memory_dir.is_dir() else []
    if why is None and dates:
        why = f"a date stated in memory has passed ({'; '.join(dates[:3])})"
    if why is None and _over_budget(project.memory_dir, cfg):
        why = "the index is past its cut"
    if why is None and not jc.force:
        return ProjectOutcome(project.name, "unchanged", "nothing changed since the last dream; model not called")
    off = mr.off_reason(jc)
    if off is not None:
        return _deterministic(jc, project, off)
    if not project.memory_dir.is_dir():
        return ProjectOutcome(project.name, "skipped", "no memory folder")
    delta = since_last_dream(jc, project, last) if cfg.dream.scope == "changed" else None
    # sessions since the last dream (the runner's gates counted them) may have made a memory stale while
    # no memory file changed: the dream searches them (issue 31)
    sessions = jc.state.sessions_touched_since(project.name, last or 0.0) if jc.state is not None else 0
    if (delta is not None and not jc.force and not delta.first and not delta.changed and not delta.deleted
            and not sessions and not dates and index_healthy(project.memory_dir, cfg)):
        return ProjectOutcome(project.name, "unchanged", "no memory file changed since the last dream and the "
                              "index is healthy; model not called")

    out = ProjectOutcome(project.name, "unchanged")
    out.details["why"] = why or "forced"
    if delta is not None:
        out.details["since"] = delta.base or "first dream"
        out.details["changed_files"] = len(delta.changed)
        out.details["deleted_files"] = len(delta.deleted)
    client: llm.Client | None = None  # made after the orientation: its run deadline starts then
    caps: list[str] = []  # the caps the model hit: a partial run
    half_done = ""  # why a capped run's staging copy may not be applied (``modelrun.consistency``)
    blocked: set[str] = set()  # the files the run found holding a conflict block
    batched: list[BatchNote] = []  # what became of the run's batched first call (``memd.llm.batch``)
    shown: list[E.Evidence] = []  # the evidence the model was handed

    def edit(ws: ap.Workspace) -> ap.Edits:
        nonlocal client, half_done
        from memd.llm import prompts
        from memd.llm.forgettool import FORGET_TOOL, FORGET_TOOL_NAME
        from memd.llm.forgettool import handler as forget_handler
        from memd.llm.memtool import MEMORY_TOOL, SEARCH_TOOL, SEARCH_TOOL_NAME
        from memd.llm.resolvetool import RESOLVE_TOOL, RESOLVE_TOOL_NAME, Resolutions, found_blocks

        st = ws.get()
        tool = mr.memory_tool(st, cfg)
        found = found_blocks({rel: b.data for rel, b in st.baseline.items()})
        blocked.update(found)
        decisions = Resolutions(found)
        handlers: dict[str, mr.Handler] = {"memory": tool.handle, RESOLVE_TOOL_NAME: decisions.handle,
                                           FORGET_TOOL_NAME: forget_handler(tool)}
        # offered in every run (tools are part of the prompt prefix every project reads from the cache)
        tools: list[dict[str, Any]] = [dict(MEMORY_TOOL), dict(RESOLVE_TOOL), dict(FORGET_TOOL)]
        if cfg.dream.max_searches > 0:
            from memd.llm.memtool import TranscriptSearch

            search = TranscriptSearch(_transcripts(jc, project), max_calls=cfg.dream.max_searches,
                                      max_line_bytes=min(cfg.transcripts.max_line_bytes, 2_000_000))
            handlers[SEARCH_TOOL_NAME] = search.handle
            tools.append(dict(SEARCH_TOOL))
        evidence = E.gather(st.root, cfg, jc.state, project.name, now=now, live=project.memory_dir)
        shown.append(evidence)
        if evidence.candidates.count:
            out.details["candidates"] = evidence.candidates.count
        material = mr.redacted(_conflicts(st, found) + _orientation(jc, project, st, last, delta, evidence),
                               out.details)
        cmd = mr.claude_md(_cwd(jc, project), jc.claude_dir, out.details)
        system = llm.cached_system(prompts.render("dream", cfg), material + ("\n\n" + cmd if cmd else ""))
        # the deadline is sized to the call cap (one more call: a max_tokens retry)
        deadline = llm.run_deadline(cfg, cfg.dream.max_tool_turns + 1)
        client = mr.make_client(jc, deadline_s=deadline)
        # the night's first call at half price, where model.batch allows it
        plan = mr.batch_plan(jc, "dream", project.name, client, deadline, cfg.model.dream_model)
        if plan is not None:
            from memd.llm.batch import BatchNote

            batched.append(BatchNote())
        res = mr.tool_loop(client, model=cfg.model.dream_model, system=system, user=_kickoff(now),
                           tools=tools, handlers=handlers, max_turns=cfg.dream.max_tool_turns, stop=jc.stop,
                           token_cap=cfg.dream.max_input_tokens,
                           batch=(plan, batched[0]) if plan is not None else None)
        out.details["tool_calls"] = res.tool_calls
        out.details["stop_reasons"] = res.stop_reasons
        out.details["refused"] = res.refused
        seen = tool.redactions + (search.redactions if cfg.dream.max_searches > 0 else 0)
        if seen:
            out.details["redactions"] = out.details.get("redactions", 0) + seen
        caps.extend(res.caps)
        if cfg.dream.max_searches > 0 and search.over_cap:
            caps.append(f"{cfg.dream.max_searches} transcript searches")
        if res.notes:
            out.details["notes"] = res.notes
        if caps and not jc.stop.is_set():
            half_done = mr.consistency(st) or ""
        return ap.Edits(res.final_text, model_called=client.usage.calls > 0, usage=client.usage,
                        abandoned=jc.stop.is_set() or bool(half_done), resolutions=decisions.resolutions(),
                        forgotten=tuple(tool.forgotten.values()))

    try:
        result = ap.run(project, edit, state_dir=jc.state_dir, job="dream", run_id=ap.new_run_id("dream", now),
                        config=cfg, review=jc.dry_run or cfg.dream.apply == "review", log=jc.log)
    except llm.ModelError as e:
        if client is not None:
            mr.add_usage(out, client.usage)
            out.model_called = client.usage.calls > 0
        out.outcome = "failed"
        out.error = e.reason
        out.message = f"model call failed: {e.reason}; nothing changed"
        mr.note_batch(out, batched)
        return out
    finally:
        if client is not None:
            client.close()
    if result.verdict is ap.Verdict.ABANDONED:
        if result.usage is not None:
            mr.add_usage(out, result.usage)
        out.model_called = result.model_called
        if half_done:  # a cap stopped the model half-way through a change: nothing applied
            mr.partial(out, caps, why=half_done)
            mr.note_batch(out, batched)
            return out
        out.outcome = "skipped"
        out.message = "stopped by shutdown before applying; nothing changed"
        mr.note_batch(out, batched)
        return out
    mr.record(out, result, caps)
    if out.outcome == "unchanged" and out.model_called and not out.details.get("tool_calls"):
        # an empty end_turn: the model looked at nothing (memd.jobs.counts_as_consolidation, ``looked``)
        out.empty_turn = True
        out.message = (f"{out.message}; " if out.message else "") + (
            "the model ended its turn without reading or searching anything: not counted as a consolidation")
    if result.model_called and shown and not jc.dry_run:
        E.note_dates(jc.state, project.name, shown[0].candidates)  # shown once: not due again for them
    if result.verdict is ap.Verdict.APPLIED and jc.log is not None:
        for b in result.blocks:  # no reason in the log: the model's words may quote memory
            jc.log.info("dream.conflict_block", project=project.name, file=b.file, line=b.line,
                        machine=b.machine, decision=b.choice or "open")
        for f in result.forgotten:  # likewise: the reason is in the history and the outcome's details
            jc.log.info("dream.forgotten", project=project.name, file=f.file, into=f.into or None,
                        stale=len(f.stale))
    if result.verdict in (ap.Verdict.APPLIED, ap.Verdict.UNCHANGED) and result.model_called and result.staged:
        settled = _settle(jc, project, blocked, result.blocks)
        if settled:
            out.details["sync_conflicts_settled"] = settled
    mr.note_batch(out, batched)
    note_consolidation(jc, "dream", out)  # also when run outside the runner
    mr.note_idle(jc, "dream", out)
    mr.note_held_back(jc, out, result)
    return out


def _deterministic(jc: JobContext, project: Project, off: str) -> ProjectOutcome:
    from memd.core.rebuild import REPAIR
    from memd.maintenance import rebuild_project

    # unattended: only what is broken is repaired (a healthy index is never rewritten, nightly or forced)
    r = rebuild_project(project, jc.config, jc.state_dir, dry_run=jc.dry_run, mode=REPAIR,
                        max_drop_share=jc.config.dream.max_delete_share)
    # Without the model only the index is rebuilt: the outcome says what happened to the files, and
    # ``model_off`` keeps it from counting as a consolidation (neither memd's last_consolidation nor
    # Claude Code's .consolidate-lock mtime may move).
    outcome: Outcome
    if r.written:
        outcome, done = "changed", "index rebuilt"
    elif r.changed and jc.dry_run and not r.refused:
        outcome, done = "proposed", "index rebuild proposed"
    elif r.error:  # a fault (no space, permission): the rebuild could not be written
        outcome, done = "failed", "index not rebuilt: " + r.error
    elif r.changed or r.refused:
        outcome = "refused"
        done = "index rebuild refused: " + ("; ".join(r.reasons) or "it cannot be written safely")
    elif not project.memory_dir.is_dir():
        outcome, done = "skipped", "no memory folder"
    elif r.reasons and not r.fits:
        # not a fault: nothing safe is left to do without the model (the rebuild never drops an entry or
        # prose to make room), so it is said as what it is every night, in the run log's word for it
        outcome = "refused"
        done = ("index not rebuilt: it needs model work to fit the budget (a dream with model work on condenses "
                "it): " + "; ".join(r.reasons))
    else:
        outcome, done = "unchanged", "index already fine"
    out = ProjectOutcome.without_model(project.name, outcome, off, done, changed=1 if r.written else 0,
                                       run_id=r.run or None)  # the rebuild's name in the history
    if r.reasons:
        out.details["reasons"] = r.reasons
    if r.changed and not r.written:
        out.details["diff"] = r.diff
    out.details["model_off"] = True
    return out


def _cwd(jc: JobContext, project: Project) -> str | None:
    """The working folder of the project's newest session (whose CLAUDE.md files the dream is given)."""
    from memd.transcripts.sessions import project_cwds

    return next(iter(project_cwds(project, jc.state)), None)


def _transcripts(jc: JobContext, project: Project) -> list[Path]:
    from memd.layout import session_files

    paths = {t.path for t in jc.state.transcripts(project.name)} if jc.state is not None else set()
    paths.update(session_files(project.dir))
    return sorted(p for p in paths if p.exists())


def _orientation(jc: JobContext, project: Project, st: ap.Staging, last: float | None,
                 delta: Delta | None = None, evidence: Any = None) -> str:
    from memd import history
    from memd.core.paths import INDEX_NAME
    from memd.memfolder.read import decode, read_bounded
    from memd.memfolder.walk import list_files

    cfg = jc.config
    r = read_bounded(st.root / INDEX_NAME, cfg.budget.max_file_bytes, hash=False, cut=True)
    index_text = decode(r) if r.data is not None else "(no MEMORY.md yet)"
    if len(index_text) > MAX_INDEX_CHARS:
        index_text = index_text[:MAX_INDEX_CHARS] + "\n... (cut: the index is far over its budget)"
    from memd.jobs import evidence as E

    manifest = (E.manifest_with_uses(st.root, cfg, evidence, live=project.memory_dir) if evidence is not None
                else mr.manifest(st.root, cfg, live=project.memory_dir))
    parts = ["## Phase 1 material: MEMORY.md as it is now", "```", index_text.rstrip(), "```", "",
             "## Topic files (path [type] date size: description (use by sessions)), newest first",
             manifest, ""]
    if evidence is not None:
        section = E.render(evidence, cfg.dream.evidence_max_chars)
        if section:
            parts.extend([section, ""])
    since = last or 0.0
    if delta is not None:
        parts.extend(_changed_texts(st.root, delta, jc.config.dream.changed_max_chars))
    elif last:
        drifted = sorted(f.rel for f in list_files(st.root).topics()
                         if _mtime(project.memory_dir / f.rel) > last)[:40]
        parts.append("## Memory files written since the last dream (check them for drift and duplicates)")
        parts.append("\n".join(f"- /memories/{r}" for r in drifted) if drifted else "(none)")
        parts.append("")
    recent = [r for r in history.list_runs(jc.state_dir, project.name, limit=30)
              if r.job == "catchup" and r.time > since][:10]
    parts.append("## Phase 2 material: catch-up runs since the last dream")
    parts.extend(f"- {datetime.fromtimestamp(r.time).strftime('%Y-%m-%d %H:%M')} {r.summary[:200]}"
                 for r in recent)
    if not recent:
        parts.append("(none)")
    if jc.state is not None:
        sessions = [t for t in jc.state.transcripts(project.name)
                    if t.last_record_at is not None and t.last_record_at > since][:20]
        parts.append("")
        parts.append(f"## Sessions since the last dream ({len(sessions)} shown)")
        parts.extend(f"- {t.session_id[:8]} last active "
                     f"{datetime.fromtimestamp(t.last_record_at or 0).strftime('%Y-%m-%d %H:%M')}"
                     for t in sessions)
    last_s = datetime.fromtimestamp(last).strftime("%Y-%m-%d %H:%M") if last else "never"
    parts.append("")
    parts.append(f"Last consolidation: {last_s}.")
    return "\n".join(parts)


def _settle(jc: JobContext, project: Project, blocked: set[str], blocks: tuple[Any, ...]) -> int:
    """The hand-off of sync's kept conflicts (``memd.sync.evidence``): a dream the model ran settles
    those whose file holds no open block after it (resolved by this dream, by hand before it, or a
    conflict that needed no block); a block left open keeps its conflict open. ``blocked``: the files
    the run found holding blocks; ``blocks``: what the applied run did to each (none: nothing)."""
    from memd.sync import evidence

    rows = evidence.open_conflicts(jc.state_dir, project.name)
    if not rows:
        return 0
    done = {b.file for b in blocks if b.resolved} - {b.file for b in blocks if not b.resolved}
    still = blocked - done
    return evidence.settle(jc.state_dir, project.name, [c.id for c in rows if c.file not in still])


CONFLICT_FILE_CHARS = 8_000  # one file holding conflict blocks, as handed in
CONFLICT_CHARS = 24_000  # all of them


def _conflicts(st: ap.Staging, found: dict[str, list[Any]]) -> str:
    """The files holding sync conflict blocks, first in the material and whole (bounded), with line
    numbers: a dream that reads little still sees both sides of every block ("" when there is none)."""
    from memd.llm.memtool import LINE_NUMBER_WIDTH

    if not found:
        return ""
    n = sum(len(bs) for bs in found.values())
    parts = [f"## Sync conflict blocks to resolve first ({n} in {len(found)} file(s))",
             "Each file holding a block, as it is now, with line numbers (`resolve_conflict` takes the "
             "line of a block's opening marker). The lines above a block are this machine's; the block "
             "holds the other machine's differing lines.", ""]
    left = CONFLICT_CHARS
    for rel in sorted(found):
        where = "; ".join(f"line {b.line} (from {b.machine}, {b.date or 'date unknown'})" for b in found[rel])
        if left <= 0:
            parts.append(f'<file path="/memories/{rel}" blocks="{where}">(left out: view it)</file>')
            continue
        text = st.baseline[rel].data.decode("utf-8", "replace")
        rows = "\n".join(f"{i:>{LINE_NUMBER_WIDTH}}\t{ln}" for i, ln in enumerate(text.split("\n"), 1))
        cap = min(CONFLICT_FILE_CHARS, left)
        if len(rows) > cap:
            rows = rows[:cap] + "\n... (cut: view the rest)"
        left -= len(rows)
        parts.append(f'<file path="/memories/{rel}" blocks="{where}">\n{rows}\n</file>')
    return "\n".join(parts) + "\n\n"


@dataclass(frozen=True)
class Delta:
    """The topic files (``team/`` aside) changed since the last dream, by their bytes: ``changed`` (new or
    different, newest first), ``deleted``; ``base``: how "since" is known; ``first``: no earlier dream is
    known (neither in memd's history nor as a last consolidation): every file is new to the dream."""

    base: str
    changed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    first: bool = False


def since_last_dream(jc: JobContext, project: Project, last: float | None) -> Delta:
    """What changed in the live folder since the last dream. "Since" is the newest complete dream run in
    memd's history (its "after" commit: the folder as that dream left it): a file whose bytes differ from
    it, or which it did not hold, changed, whoever wrote it (Claude Code, a catch-up, sync, an undo of
    that dream, the user). A file written after the last consolidation (``last``: a dream that changed
    nothing, or Claude Code's own dream, made no commit) changed too. Neither known: the first dream."""
    from memd import history
    from memd.errors import MemdError
    from memd.memfolder.walk import list_files

    base: dict[str, bytes] | None = None
    base_time = 0.0
    label = ""
    try:
        run = next((r for r in history.list_runs(jc.state_dir, project.name, limit=200)
                    if r.job == "dream" and r.complete), None)
        if run is not None:
            base = history.files_at(jc.state_dir, project.name, run.after)
            base_time = run.time
            label = (f"the last dream's commit {run.after[:10]} "
                     f"({datetime.fromtimestamp(run.time).strftime('%Y-%m-%d %H:%M')})")
    except (MemdError, OSError, KeyError, ValueError) as e:  # an unreadable history: by time only
        if jc.log is not None:
            jc.log.warning("dream.history_unread", project=project.name, error=str(e)[:200])
        base = None
    if base is None and last is None:
        return Delta("", first=True)
    if base is None:
        label = f"the last consolidation ({datetime.fromtimestamp(last or 0).strftime('%Y-%m-%d %H:%M')})"
    # the times matter only when the last consolidation made no commit (it is well after the last
    # dream's): a file rewritten with the same bytes (sync, an editor's save) has not changed
    by_time = last is not None and (base is None or last - base_time > BASE_SLACK_S)
    now = [f for f in list_files(project.memory_dir).topics() if not f.rel.startswith("team/")]
    changed: list[tuple[float, str]] = []
    for f in now:
        mtime = f.mtime or 0.0
        if by_time and last is not None and mtime > last:
            changed.append((mtime, f.rel))
        elif base is not None:
            try:
                data = (project.memory_dir / f.rel).read_bytes()
            except OSError:
                continue
            if base.get(f.rel) != data:
                changed.append((mtime, f.rel))
    names = {f.rel for f in now}
    deleted = sorted(r for r in (base or {}) if r not in names and r.endswith(".md") and r != ap.INDEX
                     and not r.startswith("team/"))
    return Delta(label, [r for _, r in sorted(changed, key=lambda x: (-x[0], x[1]))], deleted)


def index_healthy(memory_dir: Path, cfg: Any) -> bool:
    """The index is within its budget, links no missing file and leaves no topic file (``team/`` aside)
    without a line: nothing a dream would have to repair."""
    from memd.core import index as mindex
    from memd.core.links import link_target
    from memd.memfolder.walk import list_files

    try:
        text = (memory_dir / ap.INDEX).read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    topics = {f.rel for f in list_files(memory_dir).topics() if not f.rel.startswith("team/")}
    b = cfg.budget
    if mindex.measure(text, b.max_lines, b.max_chars, b.warn_ratio).level == "over":
        return False
    linked: set[str] = set()
    for e in mindex.parse(text).entries:
        t, leaves = link_target(e.target, "")
        if t is not None and not leaves and t.lower().endswith(".md"):
            if not (memory_dir / t).is_file():
                return False
            linked.add(t)
    return topics <= linked


def _over_budget(memory_dir: Path, cfg: Any) -> bool:
    """The index is past Claude Code's cut: entries no session sees, whatever changed (issue 31)."""
    from memd.core import index as mindex

    try:
        text = (memory_dir / ap.INDEX).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    b = cfg.budget
    return mindex.measure(text, b.max_lines, b.max_chars, b.warn_ratio).level == "over"


def _changed_texts(root: Path, delta: Delta, max_chars: int) -> list[str]:
    """The orientation's section of what changed since the last dream: each changed file's text as the
    staging copy holds it, newest first, up to ``max_chars``; the rest named (read on request)."""
    if delta.first:
        return ["## First dream: memd's history holds no earlier dream of this folder; view the files you need",
                ""]
    out = [f"## Files changed since {delta.base}, as they are now: check them against the rest "
           "(duplicates, contradictions, the index)"]
    left = max_chars
    named: list[str] = []
    for rel in delta.changed:
        try:
            text = (root / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if len(text) > left:
            named.append(rel)
            continue
        left -= len(text)
        out.append(f'<file path="/memories/{rel}">\n{text.rstrip()}\n</file>')
    if named:
        out.append("Also changed (view them when needed): " + ", ".join(f"/memories/{r}" for r in named[:40])
                   + (f" and {len(named) - 40} more" if len(named) > 40 else ""))
    if not delta.changed:
        out.append("(none: no memory file changed since then)")
    if delta.deleted:
        out.append("Deleted since then: " + ", ".join(f"/memories/{r}" for r in delta.deleted[:40]))
    out.append("")
    return out


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return 0.0


def _kickoff(now: float) -> str:
    today = datetime.fromtimestamp(now).strftime("%Y-%m-%d (%A)")
    return (f"Today is {today}. Consolidate the memory in /memories now, phase by phase, using the "
            "material above. When you are done, reply with a short summary.")
