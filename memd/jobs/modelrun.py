"""What catch-up and dream share: the memory manifest, the tool loop, and finishing a staged run.

``tool_loop`` drives one conversation: the model's tool calls are answered by memd's handlers
(never by the SDK's tool runner, which stops silently at its iteration cap) for at most
``max_turns`` calls. Every reply's ``stop_reason`` is read: ``end_turn`` finishes; ``tool_use``
runs the tools and continues; ``max_tokens`` is retried once (the same request, twice the budget,
not counted as a turn) and then fails; ``pause_turn`` sends the paused turn back and continues;
``refusal`` and any other reason fail (``llm.StopError``): the job's run then applies nothing and
moves no lock, gate or offset. Thinking and ``max_tokens`` come from ``llm.thinking_params``.
Prompt caching: a breakpoint on each of the two system blocks, the shared instructions (the same
bytes for every project: tools + instructions are one prefix all projects read from the cache where
it reaches the model's minimum cacheable length) and the project's material (manifest, CLAUDE.md);
the two newest user messages carry the other two, moving forward each turn, so a turn pays full
price only for what it adds even after a turn of more than ten tool calls (the API's 20-block
lookback). Only where a read can follow (``system_marks``): no system breakpoint under the model's
minimum cacheable length, none on a one-call run; the conversation's last allowed call carries one
moving breakpoint, where the previous call wrote (a read, nothing written).

Caps (``LoopResult.caps``): the conversation's model calls (``max_turns``), the run's tool calls
(``MAX_TOOL_CALLS``), the dream's searches, and an input-token cap (``token_cap``) checked with
``llm.estimate_tokens`` BEFORE each call, so it is never passed. A run that hit a cap is
``partial``: ``consistency`` decides whether its staged result may go on to the guards (the model
may have stopped half-way through a change), ``record`` says ``partial`` whatever the guards say,
and the jobs move no lock, gate or offset for it.

Message Batches (``batch``, ``batch_plan``, ``memd.llm.batch``): where ``model.batch`` allows, a
conversation's first call is submitted as a batch at half price and waited for (bounded); the loop
goes on synchronously with its reply, read exactly as a synchronous reply is, and falls back to the
call at once when the batch fails or is late. ``note_batch`` puts what happened in the outcome.

``record`` turns the result of ``memd.apply.run`` (which owns stage, rebuild, guard, apply) into
the ProjectOutcome (added, changed, deleted, rejected reasons, usage, cost).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from memd import apply as ap
from memd.jobs import JobContext, ProjectOutcome
from memd.llm import client as llm
from memd.llm.client import LoopResult  # one owner below the jobs and the plan client (no import circle)

if TYPE_CHECKING:
    from memd.config import Config
    from memd.llm.batch import BatchNote, BatchPlan
    from memd.llm.memtool import StagedMemory
    from memd.llm.planrun import PlanClient

Handler = Callable[[Any], tuple[str, bool]]
MAX_TOOL_CALLS = llm.MAX_TOOL_CALLS  # per run: a model looping on tool calls stops here
MAX_TURN_RESULT_CHARS = 60_000  # tool results of one turn (about 15,000 tokens)


def make_client(jc: JobContext, *, deadline_s: float) -> llm.Client:
    """The run's model client for ``model.backend``: memd's Messages API client, or the user's Claude
    Code CLI (``memd.llm.planrun.PlanClient``, the same attributes the jobs read: ``usage``, ``source``,
    ``close``), whose spend and session ids go to memd's state (the month's cap; catch-up skips them)."""
    if jc.config.model.backend != "claude-plan":
        return llm.Client(jc.config, deadline_s=deadline_s)
    from memd.llm import plan
    from memd.llm.planrun import PlanClient

    state, clock = jc.state, jc.clock

    def spent(usd: float, session: str) -> None:
        if state is not None:
            plan.add_spend(state, clock.time(), usd)
            plan.remember_session(state, session)

    def left() -> float | None:
        cap = jc.config.model.monthly_budget_usd
        if cap <= 0 or state is None:
            return None
        return max(0.0, cap - plan.month_spend(state, clock.time()))

    client = PlanClient(jc.config, deadline_s, jc.state_dir / plan.WORKDIR, on_spend=spent, budget_left=left)
    return cast("llm.Client", client)


def off_reason(jc: JobContext) -> str | None:
    """Why this run's model work is off (``llm.jobs_off_reason``), or the month's cap of the claude-plan
    backend (``model.monthly_budget_usd``) is spent; None: the model may be called."""
    off = llm.jobs_off_reason(jc.config)
    if off is None and jc.config.model.backend == "claude-plan":
        from memd.llm import plan

        off = plan.budget_reason(jc.config, jc.state, jc.clock.time())
    return off


def manifest(root: Path, config: Config, *, skip: set[str] | None = None, live: Path | None = None) -> str:
    """One line per topic file under root (``memd.memfolder.manifest``), dated by the live folder's mtimes."""
    from memd.memfolder.manifest import for_model

    return redacted(for_model(root, config.budget, exclude=skip or frozenset(), live=live))


def redacted(text: str, details: dict[str, Any] | None = None) -> str:
    """``text`` as it may be sent to the API (the hooks' secret rules, ``[REDACTED:<kind>]``); the hits
    are added to ``details["redactions"]`` when given. Descriptions and the index are memory too: a
    secret already in memory is not sent either."""
    from memd.transcripts.render import redact_sent

    clean, counts = redact_sent(text)
    if details is not None and counts:
        details["redactions"] = details.get("redactions", 0) + sum(counts.values())
    return clean


def memory_tool(st: ap.Staging, config: Config) -> StagedMemory:
    """The confined memory tool over a run's staging copy (the live folder named for its checks)."""
    from memd.llm.memtool import Limits, StagedMemory

    return StagedMemory(st.root, Limits(config.model.tool_max_file_bytes, config.model.tool_max_run_bytes),
                        live=st.project.memory_dir)


def _mark_last(messages: list[dict[str, Any]], *, last_call: bool = False) -> None:
    """The moving cache breakpoints, on user messages only (never on an assistant turn: a thinking
    block cannot carry one): the last block of the newest user message, and of the one before it
    (the API looks back at most 20 blocks from a breakpoint for a cached prefix: a turn of more than
    ten tool calls adds over 20 blocks, so without the second one nothing of the previous turn is
    read). With the two system blocks that is the API's four. ``last_call``: the conversation's last
    allowed call, which no read can follow: its one breakpoint is on the user message before the newest,
    where the previous call wrote, so the conversation so far is read and nothing new is written (a write
    costs 1.25x; with no breakpoint at all the call would read nothing of the conversation)."""
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            for b in content:
                if isinstance(b, dict):
                    b.pop("cache_control", None)
    users = [m for m in messages if m.get("role") == "user"][-2:]
    if last_call:  # only where the previous call wrote: a read, and nothing new written
        users = users[:-1]
    for m in users:
        content = m.get("content")
        if isinstance(content, str):
            m["content"] = [{"type": "text", "text": content}]
            content = m["content"]
        if isinstance(content, list) and content and isinstance(content[-1], dict):
            content[-1]["cache_control"] = dict(llm.CACHE)


def system_marks(system: list[dict[str, Any]], tools: list[dict[str, Any]], model: str, *,
                 read_or_reused: bool) -> list[dict[str, Any]]:
    """The system blocks as one call sends them: a block keeps its cache breakpoint only where a cache
    entry can be used. Never where the prefix up to it is shorter than the model's minimum cacheable
    length (``llm.min_cache_tokens``: neither written nor read; on Haiku the shared instructions alone
    are below it, so the project's material carries the first breakpoint). ``read_or_reused`` False (the
    conversation's last allowed call, no later conversation of the run sends this prefix and none sent it
    before): none at all, so a one-call run does not pay the 1.25x write for a read that cannot follow."""
    least = llm.min_cache_tokens(model)
    out: list[dict[str, Any]] = []
    seen: list[Any] = [tools]
    for b in system:
        seen.append(b.get("text", ""))
        plain = {k: v for k, v in b.items() if k != "cache_control"}
        # estimate_tokens errs high (3 characters a token); the API's own count is about 4
        if read_or_reused and "cache_control" in b and llm.estimate_tokens(*seen) * 3 // 4 >= least:
            plain["cache_control"] = b["cache_control"]
        out.append(plain)
    return out


def tool_loop(client: llm.Client, *, model: str, system: list[dict[str, Any]], user: str,
              tools: list[dict[str, Any]], handlers: dict[str, Handler], max_turns: int,
              stop: Any = None, betas: tuple[str, ...] = (llm.MEMORY_BETA,),
              token_cap: int | None = None, batch: tuple[BatchPlan, BatchNote] | None = None,
              prefix_shared: bool = False) -> LoopResult:
    """One conversation (see the module doc). ``token_cap``: the input tokens the client's calls may
    reach in all (``Usage.total_input``); a call whose estimate would pass it is not made. ``batch``:
    the conversation's first call goes through Message Batches (``memd.llm.batch.first_call``: the
    same caps before it, the same validation and stop reasons after it, a synchronous fallback).
    ``prefix_shared``: another conversation of the run sends (or sent) the same system prefix, so its
    breakpoints pay even on this conversation's last allowed call (``system_marks``)."""
    if getattr(client, "backend", "api") == "claude-plan":  # the CLI runs the loop (memd.llm.plan)
        return cast("PlanClient", client).converse(LoopResult(), model=model, system=system, user=user,
                                                   tools=tools, handlers=handlers, max_turns=max_turns, stop=stop,
                                                   token_cap=token_cap)
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": user}]}]
    res = LoopResult()
    budget, extra = llm.thinking_params(client.config, model)
    while res.turns - res.max_tokens_retries < max_turns:
        if stop is not None and stop.is_set():
            res.notes.append("stopped (shutdown)")
            break
        if token_cap is not None:
            need = llm.estimate_tokens(system, tools, messages)
            if client.usage.total_input + need > token_cap:
                res.caps.append(f"the run's {token_cap:,} input tokens")
                res.notes.append(f"stopped before a call of about {need:,} tokens: the run's input-token cap "
                                 f"({token_cap:,}) would be passed")
                return res
        last_call = res.turns - res.max_tokens_retries >= max_turns - 1
        _mark_last(messages, last_call=last_call)
        sent_system = system_marks(system, tools, model, read_or_reused=prefix_shared or not last_call
                                   or res.turns > 0)
        if batch is not None and res.turns == 0:
            from memd.llm import batch as lb

            msg = lb.first_call(client, batch[0], batch[1], model=model, system=sent_system, messages=messages,
                                tools=tools, betas=list(betas), max_tokens=budget, **extra)
            if msg is None:  # a shutdown while the batch was pending: it is kept for the next run
                res.notes.append("stopped (shutdown)")
                break
        else:
            msg = client.create(model=model, system=sent_system, messages=messages, tools=tools, betas=betas,
                                max_tokens=budget, **extra)
            if batch is not None and res.turns == 1:  # did this call read what the batched first call cached?
                from memd.llm import batch as lb

                lb.learn(batch[0], batch[1], msg)
        res.turns += 1
        res.stop_reason = reason = llm.stop_reason(msg)
        res.stop_reasons.append(reason)
        if reason == llm.STOP_MAX_TOKENS:
            if res.max_tokens_retries:
                raise llm.StopError(f"reply cut at max_tokens again (budget {budget:,}); nothing applied")
            res.max_tokens_retries += 1
            budget = min(llm.MAX_TOKENS_CEILING, budget * 2)
            res.notes.append(f"reply cut at max_tokens: asked again with max_tokens {budget:,}")
            continue  # the same request, a larger budget: the cut reply is dropped
        if reason == llm.STOP_REFUSAL:
            raise llm.StopError("the model refused (stop_reason refusal); nothing applied")
        if reason not in (llm.STOP_END_TURN, llm.STOP_TOOL_USE, llm.STOP_PAUSE_TURN):
            raise llm.StopError(f"unexpected stop_reason {reason[:40]!r}; nothing applied")
        uses = llm.tool_uses(msg)
        res.final_text = llm.text_of(msg) or res.final_text
        if reason == llm.STOP_END_TURN:
            return res
        messages.append({"role": "assistant", "content": [_block_param(b) for b in llm.blocks(msg)]})
        if reason == llm.STOP_PAUSE_TURN:
            continue  # the API resumes the paused turn from the assistant content sent back
        if not uses:
            raise llm.StopError("stop_reason tool_use without a tool call; nothing applied")
        results: list[dict[str, Any]] = []
        turn_chars = 0
        for u in uses:
            res.tool_calls += 1
            handler = handlers.get(u.name)
            if res.tool_calls > MAX_TOOL_CALLS:
                text, is_error = f"Error: at most {MAX_TOOL_CALLS} tool calls per run; finish now.", True
                cap = f"the run's {MAX_TOOL_CALLS} tool calls"
                if cap not in res.caps:
                    res.caps.append(cap)
            elif turn_chars > MAX_TURN_RESULT_CHARS:
                # every result is re-sent with each later call: one greedy turn must not inflate them all
                text, is_error = "Error: too much output in one turn; ask again for fewer files.", True
            elif handler is None:
                text, is_error = f"Error: no tool named {str(u.name)[:40]!r}.", True
            else:
                text, is_error = handler(u.input)
            turn_chars += len(text)
            res.refused += int(is_error)
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": u.id, "content": text}
            if is_error:
                block["is_error"] = True
            results.append(block)
        messages.append({"role": "user", "content": results})
    res.hit_turn_cap = res.turns - res.max_tokens_retries >= max_turns
    if res.hit_turn_cap:
        res.caps.append(f"{max_turns} model calls")
        res.notes.append(f"stopped at the cap of {max_turns} model calls")
    return res


def consistency(st: ap.Staging) -> str | None:
    """Why a run stopped at a cap left the staging copy half-way through a change (None: it is
    consistent and may go on to the guards, which judge the rest): the model rewrote MEMORY.md and
    its index links a file the run deleted or has not written yet. An index the model left alone is
    reconciled by the rebuild (lines to deleted files dropped, new files added), so a deletion alone
    is a whole change; a link that was dangling before the run is the folder's, not the run's."""
    from memd.core import index as mindex
    from memd.core.links import link_target
    from memd.core.paths import INDEX_NAME

    def dangling(text: str, exists: Callable[[str], bool]) -> set[str]:
        out: set[str] = set()
        for e in mindex.parse(text).entries:
            t, leaves = link_target(e.target, "")
            if t is not None and not leaves and t.lower().endswith(".md") and not exists(t):
                out.add(t)
        return out

    live = st.project.memory_dir
    base = st.baseline.get(INDEX_NAME)
    before = dangling(base.data.decode("utf-8", "replace"), lambda t: t in st.baseline
                      or (live / t).exists()) if base is not None else set()
    try:
        raw = (st.root / INDEX_NAME).read_bytes()
    except OSError:
        raw = b""
    if base is not None and raw == base.data:
        return None
    now = raw.decode("utf-8", "replace")
    after = dangling(now, lambda t: (st.root / t).is_file() or (t not in st.baseline and (live / t).exists()))
    new = sorted(after - before)
    if new:
        return (f"the run stopped half-way: MEMORY.md links {', '.join(n[:60] for n in new[:3])}"
                f"{' ...' if len(new) > 3 else ''}, which the run deleted or never wrote")
    return None


def _block_param(b: Any) -> dict[str, Any]:
    """An assistant content block as a request param (what the API accepts back)."""
    t = getattr(b, "type", None)
    if t == "text":
        return {"type": "text", "text": getattr(b, "text", "")}
    if t == "tool_use":
        return {"type": "tool_use", "id": b.id, "name": b.name, "input": b.input}
    if hasattr(b, "model_dump"):
        d: dict[str, Any] = b.model_dump(exclude_none=True)
        return d
    return {"type": "text", "text": ""}


def add_usage(out: ProjectOutcome, usage: llm.Usage) -> None:
    """The run's four token kinds (``tokens_in`` is the uncached input only; ``out.tokens_total`` sums
    all four) and its cost priced over all four."""
    out.tokens_in = usage.input_tokens
    out.tokens_out = usage.output_tokens
    out.cache_read = usage.cache_read
    out.cache_write = usage.cache_write
    out.cost_usd = round(usage.cost_usd, 6)
    out.details["model_calls"] = usage.calls
    out.details["tokens_total"] = usage.total
    if usage.unpriced:  # the cost is unknown, not $0
        out.details["unpriced_models"] = sorted(usage.unpriced)
        out.details["cost_unknown"] = True
        out.cost_unknown = True
    if usage.rejected:
        out.details["usage_rejected"] = list(usage.rejected)
    if usage.billing:  # the claude-plan backend: "plan credit" when the CLI used the plan's login
        out.details["billing"] = usage.billing
    if usage.batched_calls:  # priced at the batch rate in cost_usd
        out.details["batched_calls"] = usage.batched_calls
        out.details["batch_saved_usd"] = round(usage.batch_saved_usd, 6)


def batch_plan(jc: JobContext, job: str, project: str, client: llm.Client, run_deadline_s: float,
               model: str) -> BatchPlan | None:
    """How a run's conversations send their first call through Message Batches (``memd.llm.batch``),
    or None when ``model.batch`` does not allow it here (``memd.llm.batch.decide``: the mode, the
    provider, and for ``auto`` whether the model's batches have been paying and the endpoint has them)."""
    from memd.llm import batch as lb

    if getattr(client, "backend", "api") != "api":  # the CLI makes its own calls: no Message Batches there
        return None
    cache = lb.cache_record(jc.state, model)
    now = jc.clock.time()
    if lb.decide(jc.config, unattended=jc.unattended, source_kind=client.source.kind, cache=cache,
                 now=now, endpoint=lb.endpoint_record(jc.state, client)) is not None:
        return None
    # a dry run keeps no batch id and learns nothing: nothing of it is picked up later
    plan = lb.BatchPlan(wait_s=lb.wait_limit(jc.config, run_deadline_s), poll_s=jc.config.model.batch_poll_s,
                        key=lb.state_key(job, project), state=None if jc.dry_run else jc.state, stop=jc.stop,
                        wall=now)
    if jc.config.model.batch == "auto" and lb.probing(cache):
        lb.mark_probe(plan, model, now)
    return plan


def note_batch(out: ProjectOutcome, notes: list[BatchNote]) -> None:
    """What became of the run's batched first calls: in its details (``batch``: the run's first;
    ``batches``: each, when there were several) and a few words in its message (the run log's
    summary, which `memd report` lists)."""
    notes = [n for n in notes if n.result]
    if not notes:
        return
    out.details["batch"] = notes[0].as_dict()
    if len(notes) > 1:
        out.details["batches"] = [n.as_dict() for n in notes]
        done = sum(1 for n in notes if n.result == "succeeded")
        why = "; ".join(dict.fromkeys(n.reason for n in notes if n.fallback))
        words = f"{done} of {len(notes)} first calls batched (half price)" + (f"; batch {why}" if why else "")
    else:
        words = notes[0].summary()
    if words and words not in out.message:
        out.message = f"{out.message}; {words}" if out.message else words


def record(out: ProjectOutcome, res: ap.RunResult, caps: list[str] | None = None, *, blocks: bool = True) -> None:
    """Fill ``out`` from a staged run's result (``memd.apply.run``): outcome, message, counts, usage,
    details. An abandoned run, or one that never staged, is the job's to describe. ``caps``: the caps
    the run hit; the outcome is then ``partial`` whatever was applied (``partial``). ``blocks``: say
    what became of sync's conflict blocks (a job whose model resolves them: the dream)."""
    _record(out, res)
    if blocks and res.verdict in (ap.Verdict.APPLIED, ap.Verdict.REVIEW):
        _record_blocks(out, res)
    if res.verdict in (ap.Verdict.APPLIED, ap.Verdict.REVIEW):
        _record_forgotten(out, res)
    if caps:
        partial(out, caps, applied=res.verdict is ap.Verdict.APPLIED)


def partial(out: ProjectOutcome, caps: list[str], *, applied: bool = False, why: str = "") -> None:
    """Make ``out`` a ``partial`` outcome: the caps hit, and what became of the run's changes (applied
    because they passed the guards and were consistent; else nothing, with the reason)."""
    head = f"partial: stopped at {' and '.join(dict.fromkeys(caps))}"
    if applied:
        done = f"applied what passed the guards: {out.message}"
    elif why:
        done = f"nothing applied ({why})"
    elif out.outcome == "refused":
        done = f"nothing applied ({out.message})"
    elif out.outcome == "proposed":
        done = out.message
    else:
        done = "nothing to apply"
    out.outcome = "partial"
    out.message = f"{head}; {done}"
    out.details["caps"] = list(dict.fromkeys(caps))


def _record(out: ProjectOutcome, res: ap.RunResult) -> None:
    if res.usage is not None:
        add_usage(out, res.usage)
    out.model_called = out.model_called or res.model_called
    out.run_id = res.run_id
    out.details["run"] = res.run_id
    if res.rebuild:
        out.details["rebuild"] = list(res.rebuild[:10])
    if res.verdict is ap.Verdict.UNCHANGED:
        out.outcome = "unchanged"
        out.message = "nothing to change" + (f" ({res.note[:200]})" if res.note else "")
    elif res.verdict is ap.Verdict.REJECTED:
        out.outcome = "refused"
        out.message = "refused: " + "; ".join(res.reasons[:5])
        out.details["rejected"] = list(res.reasons)
    else:
        out.added, out.changed, out.deleted = len(res.added), len(res.changed), len(res.deleted)
        if res.verdict is ap.Verdict.REVIEW:
            out.outcome = "proposed"
            out.message = f"proposed {res.summary}; diff kept in {res.review_path}"
            out.details["review"] = str(res.review_path)
            out.details["diff"] = res.diff
        else:
            out.details["history"] = res.history
            if res.dropped:
                out.details["dropped"] = list(res.dropped)
            out.outcome = "changed" if res.changed_anything else "unchanged"
            if res.faults:  # a write failed (no space, permission): not what the run meant to do
                out.outcome = "partial" if res.changed_anything else "failed"
            out.message = res.summary
            if res.dropped:
                out.message += f" ({len(res.dropped)} part(s) dropped: {ap.dropped_note(res.dropped)})"


def _record_blocks(out: ProjectOutcome, res: ap.RunResult) -> None:
    """Per conflict block the run found (``res.blocks``), what it decided: in the details whole (file,
    line, machine, date, choice, the model's reason, redacted), in the message in short (no reason:
    the message reaches the check-in report, which holds no memory content)."""
    if not res.blocks:
        return
    from memd.core import secrets
    from memd.core.conflict import CHOICES

    out.details["conflict_blocks"] = [
        {"file": b.file, "line": b.line, "machine": b.machine, "date": b.date,
         "decision": b.choice or "open", "reason": secrets.redact(" ".join(b.reason.split()))[:300]}
        for b in res.blocks]
    done = [b for b in res.blocks if b.resolved]
    left = len(res.blocks) - len(done)
    verb = "proposed to resolve" if res.verdict is ap.Verdict.REVIEW else "resolved"
    bits: list[str] = []
    if done:
        named = "; ".join(f"{b.file} from {b.machine}: {CHOICES.get(b.choice, b.choice)}" for b in done[:3])
        bits.append(f"{len(done)} sync conflict block(s) {verb} ({named}{'; ...' if len(done) > 3 else ''})")
    if left:
        bits.append(f"{left} sync conflict block(s) left open")
    out.message += "; " + ", ".join(bits)


def _record_forgotten(out: ProjectOutcome, res: ap.RunResult) -> None:
    """The memories the run forgot or merged away (``res.forgotten``): in the details whole (file, action,
    the model's reason redacted, the absorbing file, the sentences declared stale), in the message by name
    ("forgot a.md; merged b.md into c.md"), which `memd report` lists."""
    if not res.forgotten:
        return
    from memd.core import secrets

    def clean(text: str) -> str:
        return secrets.redact(" ".join(text.split()))[:300]

    rows = []
    for f in res.forgotten:
        d = f.as_dict()
        d["reason"] = clean(f.reason)
        if f.stale:
            d["stale"] = [{"text": clean(x.text), "reason": clean(x.reason)} for x in f.stale]
        rows.append(d)
    out.details["forgotten"] = rows
    verb = ("would forget", "would merge") if res.verdict is ap.Verdict.REVIEW else ("forgot", "merged")
    named = [f"{verb[1]} {f.file} into {f.into}" if f.into else f"{verb[0]} {f.file}" for f in res.forgotten[:5]]
    out.message += "; " + "; ".join(named) + ("; ..." if len(res.forgotten) > 5 else "")


HELD_BACK_WARNING = "index_held_back"


def note_held_back(jc: JobContext, out: ProjectOutcome, res: ap.RunResult) -> None:
    """Topic files the run's final repair kept without an index line (the index had no room even after
    condensing): a warning that ``memd status`` shows and ``memd report`` lists, with the files, and
    ``details["held_back"]``. An applied run whose repair held nothing back closes it (every file is
    indexed); a run that changed nothing ran no repair and says nothing either way."""
    if jc.state is None or jc.dry_run or res.verdict is not ap.Verdict.APPLIED:
        return
    held = [a.split()[1] for a in res.rebuild if a.startswith("left ") and " unindexed" in a]
    if not held:
        jc.state.clear_warning(out.project, HELD_BACK_WARNING)
        return
    out.details["held_back"] = held
    jc.state.set_warning(out.project, HELD_BACK_WARNING, "warning", {
        "files": len(held),
        "reason": (f"{', '.join(held[:5])}{' ...' if len(held) > 5 else ''} kept without an index line: "
                   "MEMORY.md has no room for it (recall still finds it by its description; condense the "
                   "index, or let the dream merge files)")})


IDLE_WARNING = "model_runs_change_nothing"
IDLE_STREAK = 3


def note_idle(jc: JobContext, job: str, out: ProjectOutcome) -> None:
    """Peers' consolidations reported "ok" for weeks while changing nothing (facts.md section 8): after
    IDLE_STREAK successful model runs in a row that changed nothing, open a warning the check-in
    report shows; a run that changes something closes it."""
    if jc.state is None or jc.dry_run:
        return
    if out.outcome == "changed":
        jc.state.clear_warning(out.project, IDLE_WARNING)
        return
    if out.outcome != "unchanged" or not out.model_called:
        return
    streak = 1  # this run; its own row is still "running" and is not read
    # the project's model runs before this one, filtered by SQLite: an idle project's skipped catch-ups
    # (twelve a day) and its runs without the model must not push them out of a fixed window of rows
    for r in jc.state.last_runs(out.project, (job,), IDLE_STREAK * 4, model_only=True):
        if r.outcome == "unchanged":
            streak += 1
        else:
            break
    if streak >= IDLE_STREAK:
        jc.state.set_warning(out.project, IDLE_WARNING, "warning",
                             {"job": job, "runs": streak,
                              "message": f"the last {streak} {job} runs called the model and changed nothing"})


# --------------------------------------------------------------------------- CLAUDE.md handed in

CLAUDE_MD_MAX_CHARS = 12_000  # all CLAUDE.md text handed to one run (about 3,000 tokens)
CLAUDE_MD_FILE_BYTES = 64_000  # read of one file
_CLAUDE_MD_NAMES = ("CLAUDE.md", "CLAUDE.local.md", ".claude/CLAUDE.md")


def claude_md_files(cwd: str | None, claude_dir: Path) -> list[Path]:
    """The CLAUDE.md files a session started in ``cwd`` loads at start, in Claude Code's order: the
    user's (``~/.claude/CLAUDE.md`` and its unconditional rules), then from the file system's root down
    to ``cwd``: ``CLAUDE.md``, ``CLAUDE.local.md``, ``.claude/CLAUDE.md`` and the rules in
    ``.claude/rules/`` without ``paths:`` (those load only when a matching file is read). CLAUDE.md
    files below ``cwd`` load on demand and are not included; ``@`` imports are not followed."""
    out: list[Path] = [claude_dir / "CLAUDE.md", *_rules(claude_dir / "rules")]
    if cwd and cwd.startswith("/"):
        here = Path(cwd)
        for d in [*reversed(here.parents), here]:
            out.extend(d / n for n in _CLAUDE_MD_NAMES)
            out.extend(_rules(d / ".claude" / "rules"))
    seen: set[Path] = set()
    found: list[Path] = []
    for p in out:
        if p not in seen and p.is_file():
            seen.add(p)
            found.append(p)
    return found


def _rules(folder: Path) -> list[Path]:
    try:
        names = sorted(p for p in folder.iterdir() if p.suffix == ".md")
    except OSError:
        return []
    return [p for p in names if not _conditional(p)]


def _conditional(p: Path) -> bool:
    head = _read(p, 4000)
    if not head.startswith("---"):
        return False
    end = head.find("\n---", 3)
    return any(line.startswith("paths:") for line in head[: end if end > 0 else len(head)].splitlines())


def _read(p: Path, limit: int) -> str:
    try:
        with p.open("rb") as f:  # CLAUDE.md is often a symlink (to AGENTS.md): followed, as Claude Code does
            return f.read(limit).decode("utf-8", "ignore")
    except OSError:
        return ""


def claude_md(cwd: str | None, claude_dir: Path, details: dict[str, Any] | None = None,
              max_chars: int = CLAUDE_MD_MAX_CHARS, *, skip: Collection[Path] = ()) -> str:
    """The CLAUDE.md text a session in ``cwd`` loads (``claude_md_files``), bounded to ``max_chars``
    and redacted (``redacted``: counted in ``details``), as a section of the project's material; ""
    when there is none. The model is told it is in every session already, so it does not save it again."""
    parts: list[str] = []
    left = max_chars
    for p in claude_md_files(cwd, claude_dir):
        if p in skip:  # handed in already (the run's system prompt)
            continue
        text = _read(p, CLAUDE_MD_FILE_BYTES).strip()
        if not text:
            continue
        if left <= 200:
            parts.append(f'<file path="{p}">(left out: the CLAUDE.md budget of {max_chars:,} characters is used)'
                         "</file>")
            continue
        if len(text) > left:
            text = text[:left] + f"\n... (cut: {len(text) - left:,} more characters)"
        left -= len(text)
        parts.append(f'<file path="{p}">\n{text}\n</file>')
    if not parts:
        return ""
    return redacted("## CLAUDE.md loaded by the sessions (already in every session: never save it again)\n"
                    + "\n".join(parts), details)
