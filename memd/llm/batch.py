"""A run's first call through the Message Batches API: half the list price, and never a stall.

Anthropic's rules (the batch-processing guide; SDK 2.15 ``client.beta.messages.batches``): a batched
request is billed at 50% of the list price, prompt caching applies to it (best effort), results come
within 24 hours (usually minutes), each request carries a ``custom_id``, and each result is one of
``succeeded``, ``errored``, ``canceled`` or ``expired`` (only a success is billed).

What memd batches (``decide``): the first call of each conversation of a catch-up run (one per long
span piece or group of short sessions) and of a dream, where ``model.batch`` allows it: ``auto`` only
in a run no one waits on (``JobContext.unattended``: the daemon's scheduled catch-ups and nightly
dreams), ``on`` in every catch-up and dream run, ``off`` never; never through Bedrock or Vertex (the
SDK's batches are Anthropic's API only). The later calls of a conversation need the reply to go on
and are made at once. Each first call is its own batch of one request: the jobs run one project at
a time (its lock, its staging copy, in a child process) and a conversation's first call is made only
when the previous conversation has ended, so neither projects nor conversations share a batch.

``first_call`` submits the request, polls it every ``model.batch_poll_s`` for at most what is left
of the run's wait (``wait_limit``: ``model.batch_wait_minutes``, cut to what ``daemon.job_timeout_s``
leaves after the run's deadline; each wait comes out of it, and with none left a first call is made
at once), and returns the batched reply, counted at ``BATCH_RATE`` and validated as a synchronous
reply is (``Client.account``); the conversation's tool loop goes on synchronously with it, under the
same caps and stop-reason rules. A batch that could not be submitted, errored, expired, was
cancelled, is gone, or is not done in time (it is cancelled then; a success that lands meanwhile is
used, it is billed anyway) falls back to the synchronous call at once, with the run's full deadline
(the wait does not count toward it). ``BatchNote`` says what happened (the run's details).

Batching only where it pays (``auto``): a batched first call is cheaper only when the prefix it
writes to the cache is read by its conversation's next call; Anthropic caches batched requests on a
best-effort basis, and where they are not cached the next call writes the prefix itself (1.25x) instead
of reading it (0.1x), which costs more than the batch saves (``docs/benchmarks.md``: 0.58x of the
night's cost when batches are cached, 1.31x when not). So each batched first call that is followed by
another call is judged (``observe``: ``hit`` when the next call read what it wrote, ``miss`` when the
next call had to write it) and the model's last ``KEEP`` judgements are kept in the state
(``batch.cache.<model>``). With the last ``MISSES_TO_STOP`` all misses, ``auto`` stops batching that
model's calls, but for one probe a week after the last judgement (``PROBE_EVERY_S``: a dream runs
once a night, so a daily probe would be every dream), so a change on Anthropic's side is seen; ``on``
batches regardless. The decision is made once per run.

An endpoint without batches (a proxy or gateway in ``model.base_url`` that answers a create with 404,
405 or 501) is recorded (``batch.endpoint.<digest of its URL>``): ``auto`` then makes the first call at
once without trying, for a week, after which one run tries again (a submitted batch clears the record);
``on`` tries every run.

Never paying twice: the batch id is recorded in the state store (``batch.<job>.<project>``) with a
digest of the request before the first poll. A shutdown while waiting leaves the batch and its record
(nothing of the run is applied; its span and gates stay); the project's next run that sends the
same request (same digest: the folder and the span unchanged) picks the batch up instead of
submitting a new one; a different request cancels the recorded batch first. A record is dropped
once its batch's result is read, or the batch is cancelled or gone.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import threading

    from memd.config import Config
    from memd.llm.client import Client

BATCH_RATE = 0.5  # Message Batches bill 50% of the list price
KEY_PREFIX = "batch."
RESULTS = ("succeeded", "errored", "canceled", "expired")
CALL_TIMEOUT_S = 60.0  # one batches API call (create, retrieve, results, cancel)
CHILD_MARGIN_S = 60.0  # left between a child's batch wait plus run deadline and its hard time limit


KEEP = 5  # cache judgements kept per model
MISSES_TO_STOP = 3  # the last this many all misses: auto stops batching the model
PROBE_EVERY_S = 7 * 86_400.0  # ... but for one probe a week (a dream runs once a night)
CACHE_KEY = "batch.cache."
ENDPOINT_KEY = "batch.endpoint."  # + a digest of the base URL: an endpoint without Message Batches
NO_BATCHES = (404, 405, 501)  # what a create answers where the endpoint (a proxy, a gateway) has no batches route


def decide(config: Config, *, unattended: bool, source_kind: str, cache: dict[str, Any] | None = None,
           now: float = 0.0, endpoint: dict[str, Any] | None = None) -> str | None:
    """None when a run's first call may be batched; else why not (a short phrase). ``cache``: the
    model's recorded cache judgements (``cache_record``); ``now``: wall time, for the daily probe;
    ``endpoint``: what the endpoint answered when a batch could not be submitted (``endpoint_record``)."""
    mode = config.model.batch
    if mode == "off":
        return "model.batch is off"
    if source_kind in ("bedrock", "vertex"):
        return "Message Batches are not offered through Bedrock or Vertex"
    if mode == "auto" and not unattended:
        return "someone waits on this run (model.batch = auto batches scheduled runs only)"
    if mode == "auto" and endpoint is not None:
        at, code = endpoint.get("at"), endpoint.get("status")
        if isinstance(at, (int, float)) and now - at < PROBE_EVERY_S:
            return (f"the endpoint answered HTTP {code} to a batch: it has no Message Batches (one try a week; "
                    "model.batch = on tries every run)")
    if mode == "auto" and cache is not None:
        seen = [x for x in cache.get("seen", []) if x in ("hit", "miss")]
        last = seen[-MISSES_TO_STOP:]
        # the last batch judged, or the last probe: a day after the later of the two, one probe
        since = max((v for v in (cache.get("probe"), cache.get("at")) if isinstance(v, (int, float))), default=0.0)
        if len(last) == MISSES_TO_STOP and all(x == "miss" for x in last) and now - since < PROBE_EVERY_S:
            return (f"the last {MISSES_TO_STOP} batched calls' cache writes were not read by the calls after them: "
                    "a batch costs more than it saves here (one probe a week)")
    return None


def probing(cache: dict[str, Any] | None) -> bool:
    """Whether a batch allowed by ``decide`` is the daily probe of a model whose batches miss the cache."""
    seen = (cache or {}).get("seen", [])
    return len(seen) >= MISSES_TO_STOP and all(x == "miss" for x in seen[-MISSES_TO_STOP:])


def observe(first: Any, second: Any) -> str | None:
    """``hit``: the conversation's next call read from the cache what the batched first call wrote or
    read (it was cached); ``miss``: the next call wrote a prefix the batch did not leave; None: nothing
    cacheable to judge (a prefix under the model's minimum). ``first``, ``second``: the usages."""
    from memd.llm.client import usage_count

    def n(u: Any, name: str) -> int:
        return usage_count(getattr(u, name, None) if not isinstance(u, dict) else u.get(name), name)

    prefix = n(first, "cache_creation_input_tokens") + n(first, "cache_read_input_tokens")
    read, wrote = n(second, "cache_read_input_tokens"), n(second, "cache_creation_input_tokens")
    if prefix > 0 and read >= 0.9 * prefix:
        return "hit"
    if wrote > 0:
        return "miss"
    return None


def cache_record(state: Any, model: str) -> dict[str, Any] | None:
    """The model's recorded cache judgements (``{"seen": [...], "probe": wall time}``), or None."""
    return _kv_dict(state, CACHE_KEY + model)


def learn(plan: BatchPlan, note: BatchNote, second: Any) -> None:
    """Judge the batched first call by its conversation's next call (``observe``) and record it."""
    if plan.state is None or note.result != "succeeded" or note.usage is None or not note.model:
        return
    verdict = observe(note.usage, getattr(second, "usage", None))
    note.cache = verdict or ""
    if verdict is None:
        return
    rec = cache_record(plan.state, note.model) or {}
    kept = [x for x in rec.get("seen", []) if x in ("hit", "miss")][-(KEEP - 1):]
    seen = [*kept, verdict]
    plan.state.set(CACHE_KEY + note.model, json.dumps({**rec, "seen": seen, "at": plan.wall}))


def endpoint_key(client: Client) -> str:
    url = str(getattr(client.sdk, "base_url", "") or "")
    return ENDPOINT_KEY + hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def endpoint_record(state: Any, client: Client) -> dict[str, Any] | None:
    """What the client's endpoint last answered when a batch could not be submitted for want of the
    route (``{"status": 404, "at": wall time}``), or None."""
    return _kv_dict(state, endpoint_key(client))


def _no_batches(plan: BatchPlan, client: Client, e: BaseException) -> None:
    """Keep that the endpoint has no batches route, so ``auto`` stops paying a failed request a run;
    a submitted batch clears it."""
    code = getattr(e, "status_code", None)
    if plan.state is not None and code in NO_BATCHES:
        plan.state.set(endpoint_key(client), json.dumps({"status": code, "at": plan.wall}))


def mark_probe(plan: BatchPlan, model: str, now: float) -> None:
    if plan.state is not None:
        rec = cache_record(plan.state, model) or {}
        plan.state.set(CACHE_KEY + model, json.dumps({**rec, "probe": now}))


def wait_limit(config: Config, run_deadline_s: float) -> float:
    """Seconds a run may wait for its batch: ``model.batch_wait_minutes``, and with the jobs in child
    processes no more than ``daemon.job_timeout_s`` leaves after the run's deadline (the child is
    killed past it)."""
    w = config.model.batch_wait_minutes * 60.0
    if config.daemon.isolate_jobs:
        w = min(w, max(0.0, config.daemon.job_timeout_s - run_deadline_s - CHILD_MARGIN_S))
    return w


def state_key(job: str, project: str) -> str:
    return f"{KEY_PREFIX}{job}.{project}"


@dataclass(frozen=True)
class Pending:
    """A batch a run submitted and left (a shutdown while it waited): its project's next run with the
    same request picks it up (``memd status`` shows it)."""

    job: str
    project: str
    batch_id: str
    at: float | None

    def as_json(self) -> dict[str, Any]:
        return {"job": self.job, "project": self.project, "id": self.batch_id, "at": self.at}


def pending(state: Any) -> list[Pending]:
    """The batches recorded in ``state`` (a StateStore) and not yet read, cancelled or gone."""
    out: list[Pending] = []
    for key, raw in state.items(KEY_PREFIX).items():
        job, _, project = key[len(KEY_PREFIX):].partition(".")
        if job in ("cache", "endpoint") or not project:  # judgements of a model's cache or an endpoint
            continue
        rec = _json_dict(raw)
        if rec is not None and isinstance(rec.get("id"), str):
            at = rec.get("at")
            out.append(Pending(job, project, rec["id"], float(at) if isinstance(at, int | float) else None))
    return out


@dataclass
class BatchPlan:
    """How one run batches its first call: the wait, the poll interval, where its batch id is kept
    (``state``: a StateStore's ``get``/``set``/``delete``, under ``key``; None keeps nothing) and the
    shutdown event."""

    wait_s: float
    poll_s: float
    key: str
    state: Any = None
    stop: threading.Event | None = None
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] | None = None  # default: the stop event's wait (a shutdown wakes it)
    wall: float = 0.0  # the run's wall time (JobContext.clock): when a cache judgement was made


@dataclass
class BatchNote:
    """What became of a run's batched first call (``as_dict`` goes into the run's details)."""

    batch_id: str = ""
    result: str = ""  # succeeded | errored | canceled | expired | timeout | shutdown | not submitted | gone
    waited_s: float = 0.0
    resumed: bool = False  # a batch recorded by an earlier run was picked up
    cancelled: list[str] = field(default_factory=list)  # batch ids memd cancelled
    fallback: bool = False  # the call was made synchronously after all
    reason: str = ""  # why it fell back (short, safe to log)
    model: str = ""
    usage: Any = None  # the batched reply's usage (judged by the next call: ``learn``)
    cache: str = ""  # hit | miss: the next call read what the batch cached, or had to write it

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.batch_id, "result": self.result, "waited_s": round(self.waited_s, 1)}
        if self.resumed:
            d["resumed"] = True
        if self.cancelled:
            d["cancelled"] = list(self.cancelled)
        if self.fallback:
            d["fallback"] = True
            d["reason"] = self.reason
        if self.cache:
            d["cache"] = self.cache
        return d

    def summary(self) -> str:
        """A few words for the run's message (its record and `memd report`)."""
        if self.result == "succeeded":
            return "first call batched (half price)" + (" after a restart" if self.resumed else "")
        if self.fallback:
            return f"batch {self.reason}: first call made at once"
        return ""


def digest(params: dict[str, Any], betas: list[str]) -> str:
    """The request's identity: the same request after a restart has the same digest."""
    text = json.dumps({"params": params, "betas": betas}, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def first_call(client: Client, plan: BatchPlan, note: BatchNote, *, model: str, betas: list[str],
               **request: Any) -> Any:
    """A conversation's first call through a batch (see the module doc): the reply, counted at the
    batch rate and validated; or the synchronous call's reply after a fallback; or None when a
    shutdown came while waiting (the batch and its record are kept for the next run). The time
    waited comes out of ``plan.wait_s``, the run's whole wait: with none left, the call is made at
    once without a batch (``note`` stays empty)."""
    try:
        return _first_call(client, plan, note, model=model, betas=betas, **request)
    finally:
        plan.wait_s = max(0.0, plan.wait_s - note.waited_s)


def _first_call(client: Client, plan: BatchPlan, note: BatchNote, *, model: str, betas: list[str],
                **request: Any) -> Any:
    params = client.params(model=model, **request)
    key = digest(params, betas)
    custom_id = "memd-" + key[:32]
    batches = client.sdk.beta.messages.batches
    errors = _errors(client)
    batch_id = ""
    rec = _load(plan)
    if rec is not None and rec.get("digest") == key and isinstance(rec.get("id"), str):
        batch_id, note.resumed = rec["id"], True
    elif rec is not None:
        _cancel(client, plan, note, str(rec.get("id") or ""))
    if not batch_id and plan.wait_s <= 0:  # the run's wait is used up: no batch that could not be waited for
        return client.create(model=model, betas=betas, **request)
    if not batch_id:
        try:
            made = batches.create(requests=[{"custom_id": custom_id, "params": params}],
                                  timeout=_call_timeout(client), **({"betas": betas} if betas else {}))
            batch_id = str(made.id)
        except errors as e:
            _no_batches(plan, client, e)
            return _fallback(client, note, "not submitted", f"not submitted ({_why(e)})", model=model,
                             betas=betas, **request)
        _save(plan, {"id": batch_id, "digest": key, "custom_id": custom_id, "at": time.time()})
        if plan.state is not None:
            plan.state.delete(endpoint_key(client))
    note.batch_id = batch_id
    t0 = plan.clock()
    status = ""
    late = ""  # memd cancelled it for taking too long (the reason of a fallback)
    while True:
        note.waited_s = plan.clock() - t0
        try:
            b = batches.retrieve(batch_id, timeout=_call_timeout(client))
            status = str(getattr(b, "processing_status", "") or "")
        except errors as e:
            if getattr(e, "status_code", None) == 404:  # gone (deleted, or another workspace's)
                _drop(plan)
                client.deadline += note.waited_s
                return _fallback(client, note, "gone", "gone", model=model, betas=betas, **request)
            status = ""  # a failed poll: polled again until the wait is over
        if status == "ended":
            break
        if plan.stop is not None and plan.stop.is_set():
            note.result = "shutdown"
            return None
        if note.waited_s >= plan.wait_s:
            late = f"not done within {plan.wait_s:g} s (cancelled)"
            _cancel(client, plan, note, batch_id, keep=True)
            try:  # the batch may have ended meanwhile: a success is billed, so it is used
                b = batches.retrieve(batch_id, timeout=_call_timeout(client))
                status = str(getattr(b, "processing_status", "") or "")
            except errors:
                status = ""
            if status != "ended":
                _drop(plan)
                client.deadline += note.waited_s
                return _fallback(client, note, "timeout", late, model=model, betas=betas, **request)
            break
        _pause(plan, min(plan.poll_s, max(0.0, plan.wait_s - note.waited_s)))
    client.deadline += note.waited_s  # the synchronous calls keep the run's whole deadline
    result = None
    try:
        stream = batches.results(batch_id, timeout=_call_timeout(client))
        try:
            for line in stream:
                if getattr(line, "custom_id", None) == custom_id:
                    result = line.result
                    break
        finally:
            stream.close()
    except errors as e:
        _drop(plan)
        return _fallback(client, note, "failed", f"results unreadable ({_why(e)})", model=model, betas=betas,
                         **request)
    _drop(plan)
    kind = str(getattr(result, "type", "") or "") if result is not None else ""
    if kind != "succeeded":
        if late:  # cancelled by memd (its requests canceled): it was the wait that ended it
            return _fallback(client, note, "timeout", late, model=model, betas=betas, **request)
        why = {"errored": "errored", "expired": "expired", "canceled": "canceled"}.get(kind, "without a result")
        if kind == "errored":
            why += _error_type(result)
        return _fallback(client, note, kind or "missing", why, model=model, betas=betas, **request)
    note.result = "succeeded"
    note.model = model
    note.usage = getattr(getattr(result, "message", None), "usage", None)
    from memd.llm import client as llm

    msg = getattr(result, "message", None)
    if msg is None:
        raise llm.ModelError("malformed reply (a batch result without a message)")
    return client.account(model, msg, rate=BATCH_RATE)


# --------------------------------------------------------------------------- helpers


def _errors(client: Client) -> tuple[type[BaseException], ...]:
    a = client._anthropic
    return (a.AnthropicError, ValueError, TypeError, KeyError, AttributeError)


def _call_timeout(client: Client) -> float:
    return min(CALL_TIMEOUT_S, client.config.model.timeout_s)


def _why(e: BaseException) -> str:
    code = getattr(e, "status_code", None)
    return f"HTTP {code}" if isinstance(code, int) else type(e).__name__


def _error_type(result: Any) -> str:
    err = getattr(getattr(getattr(result, "error", None), "error", None), "type", None)
    return f" ({str(err)[:60]})" if isinstance(err, str) and err else ""


def _fallback(client: Client, note: BatchNote, result: str, reason: str, *, model: str, betas: list[str],
              **request: Any) -> Any:
    note.result = note.result or result
    note.fallback = True
    note.reason = reason
    return client.create(model=model, betas=betas, **request)


def _pause(plan: BatchPlan, seconds: float) -> None:
    if plan.sleep is not None:
        plan.sleep(seconds)
    elif plan.stop is not None:
        plan.stop.wait(seconds)
    else:
        time.sleep(seconds)


def _cancel(client: Client, plan: BatchPlan, note: BatchNote, batch_id: str, *, keep: bool = False) -> None:
    """Cancel a batch memd no longer waits for (best effort: one that ended cannot be cancelled);
    its record is dropped unless ``keep`` (the caller still reads it)."""
    if batch_id:
        try:
            client.sdk.beta.messages.batches.cancel(batch_id, timeout=_call_timeout(client))
            note.cancelled.append(batch_id)
        except _errors(client):
            pass
    if not keep:
        _drop(plan)


def _load(plan: BatchPlan) -> dict[str, Any] | None:
    return _kv_dict(plan.state, plan.key)


def _kv_dict(state: Any, key: str) -> dict[str, Any] | None:
    """The JSON object a StateStore keeps under ``key`` (None: no state, no value, or not an object)."""
    return _json_dict(state.get(key)) if state is not None else None


def _json_dict(raw: str | None) -> dict[str, Any] | None:
    try:
        rec = json.loads(raw) if raw else None
    except ValueError:
        return None
    return rec if isinstance(rec, dict) else None


def _save(plan: BatchPlan, rec: dict[str, Any]) -> None:
    if plan.state is not None:
        plan.state.set(plan.key, json.dumps(rec))


def _drop(plan: BatchPlan) -> None:
    if plan.state is not None:
        plan.state.delete(plan.key)
