"""What one active project costs a night: a fixed, realistic day replayed through the loopback stand-in.

    .venv/bin/python bench/bench_cost.py                      # this checkout, JSON on stdout
    MEMD_BENCH_ROOT=/path/to/before .venv/bin/python bench/bench_cost.py > before.json
    .venv/bin/python bench/bench_cost.py --before before.json --write-docs
    (--stuck: the day of a project whose catch-ups are refused; --also, --stuck-pair: other runs' JSON
    cited in the section; --extract-model, --dream-model: other models)
    .venv/bin/python bench/bench_cost.py --batch both --write-docs   # model.batch auto vs off, same run

``--batch`` (off, the default; auto; both): the day's runs are the daemon's scheduled ones (unattended),
so ``model.batch = auto`` sends each run's first call as a Message Batch; the stand-in ends a batch at
its first poll and answers its request as it answers a call (caching simulated alike: Anthropic's
caching of batches is best effort, so the cache share is an upper bound), and a batched request's
dollars are half its list price. ``both`` runs the day twice in one process (off is the baseline) and
writes the section "Cost per night with Message Batches".

The workload (docs/model-jobs.md's shape): one project with a 200-file memory folder (and its index);
over the day 10 sessions of ~100 KB finish, two before each of five catch-up runs (10:00 ... 18:00);
the other seven runs of the day find nothing to read; at night one dream. The catch-up runs are two
hours apart in a virtual clock that the stand-in's prompt cache follows (an entry lives five
minutes after its last use), so nothing is read from the cache of an earlier run; each model call
advances the clock by 10 seconds.

The stand-in (``tests/plugins/stub_api.py``) estimates tokens as characters / 4 of the request's JSON
(not Anthropic's tokenizer) and simulates prompt caching by Anthropic's documented rules: a breakpoint
writes the prefix up to it, a later request reads the longest cached prefix within 20 blocks before
one of its breakpoints, a prefix shorter than the model's minimum cacheable length is neither written
nor read (``MIN_CACHE``), entries expire after five minutes unused. The model is scripted
(a catch-up conversation adds one fact to an existing topic file, as a full folder needs, and ends;
a dream is ``bench_llm.scripted_model``'s: it views four files, searches twice, merges one file,
then ends), so both versions are driven by the same model;
its output tokens are the stand-in's estimate of the reply (no thinking tokens). Dollars use this
checkout's ``model.prices`` (list prices) for every version, by the model each request named.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import bench_llm as B  # noqa: E402  (imports memd from MEMD_BENCH_ROOT when set)

from memd.clock import ManualClock  # noqa: E402
from memd.config import Config, ModelConfig, replace  # noqa: E402
from memd.jobs import JobContext  # noqa: E402
from memd.jobs.catchup import catchup_project  # noqa: E402
from memd.jobs.dream import dream_project  # noqa: E402
from memd.layout import Project  # noqa: E402
from memd.state import StateStore  # noqa: E402

# Minimum cacheable prompt length (tokens) per model, as Anthropic documents it: Haiku 4.5 and Opus
# 4.5/4.6 4,096; Sonnet 4.6 2,048; Sonnet 4.5 and the Sonnet 5 family 1,024 (Sonnet 5.5 taken as
# Sonnet 5's: its own figure was not found). Matched as prefixes of the model id.
MIN_CACHE = {"claude-haiku-4-5": 4096, "claude-opus-4-5": 4096, "claude-opus-4-6": 4096,
             "claude-sonnet-4-6": 2048, "claude-sonnet-4-5": 1024, "claude-sonnet-5": 1024,
             "claude-haiku-5-5": 4096}  # Haiku 5.5: not found either; taken as Haiku 4.5's (the cautious guess)
CALL_SECONDS = 10.0  # virtual time one model call takes
SESSIONS_PER_RUN = (2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0)  # finished before each of the day's 12 catch-ups
SESSION_BYTES = 100_000
FILES = 200
PRICES = Config().model.prices  # this checkout's list prices, for every version measured
BATCH_RATE = 0.5  # Message Batches: 50% of the list price


def price(model: str) -> dict[str, float] | None:
    best = max((k for k in PRICES if model.startswith(k)), key=len, default=None)
    return PRICES[best] if best else None


def tally(requests: list[Any]) -> dict[str, Any]:
    kinds = {"calls": 0, "input": 0, "cache_write": 0, "cache_read": 0, "output": 0, "usd": 0.0, "batched": 0}
    unknown: set[str] = set()
    for r in requests:
        u, body = r.usage, r.body
        if not u or not isinstance(body, dict):
            continue
        kinds["calls"] += 1
        kinds["input"] += u["input_tokens"]
        kinds["cache_write"] += u["cache_creation_input_tokens"]
        kinds["cache_read"] += u["cache_read_input_tokens"]
        kinds["output"] += u["output_tokens"]
        per = kinds.setdefault("by_model", {}).setdefault(str(body.get("model")), [0, 0, 0, 0])
        for i, k in enumerate(("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
                               "output_tokens")):
            per[i] += u[k]
        p = price(str(body.get("model")))
        if p is None:
            unknown.add(str(body.get("model")))
            continue
        rate = BATCH_RATE if getattr(r, "batched", False) else 1.0  # a Message Batches request: half price
        kinds["batched"] += int(rate != 1.0)
        kinds["usd"] += rate * (u["input_tokens"] * p["input"] + u["cache_creation_input_tokens"] * p["cache_write"]
                                + u["cache_read_input_tokens"] * p["cache_read"]
                                + u["output_tokens"] * p["output"]) / 1e6
    kinds["usd"] = round(kinds["usd"], 5)
    kinds["unpriced"] = sorted(unknown)
    return kinds


def plant_candidates(mem: Path, state: Any, project: str, now: float) -> None:
    """Evidence for the dream (issue 31), the same for every version: four files repeating another's body
    behind a vague description, three memories whose "until" date has passed, and (where the state keeps
    use counts) 30 sessions that loaded the index and read every other file (the rest are unused)."""
    names = sorted(p.name for p in mem.glob("*_topic_*.md"))
    for i in range(4):
        src, dst = mem / names[i], mem / names[100 + i]
        body = src.read_text().split("---\n", 2)[-1]
        dst.write_text(f"---\nname: Notes {i}\ndescription: notes from a testing session\ntype: project\n---\n"
                       f"{body}")
    for i in range(3):
        p = mem / names[150 + i]
        p.write_text(p.read_text() + f"\nMerge freeze for release {i} until 2026-01-{10 + i:02d}.\n")
    for p in mem.iterdir():
        os.utime(p, (B.OLD, B.OLD))
    if hasattr(state, "record_uses"):
        for n in range(30):
            state.record_uses(project, f"s{n}", [("load", "", "", now - 86400 + n)])
        state.record_uses(project, "s0", [("read", f"t{i}", names[i], now - 3600) for i in range(0, len(names), 2)])


def night(seed: int = 24, models: dict[str, str] | None = None, stuck: bool = False,
          batch: str = "off", batch_caches: bool = True, candidates: bool = False) -> dict[str, Any]:
    """One project's day and night (the module doc). ``stuck``: the catch-up model creates a new file
    each time, which the full index (200 lines) refuses: the issue's project whose catch-ups are
    refused run after run."""
    rng = random.Random(seed)
    clock = ManualClock(datetime(2026, 3, 10, 9, 0, tzinfo=UTC))
    with tempfile.TemporaryDirectory() as tmp, B.StubAPI() as stub:
        stub.min_cache_by_model = dict(MIN_CACHE)
        if not batch_caches:  # older stand-ins have no batches: only set when asked
            stub.batch_caches = False
        stub.clock = clock.time
        dreamer = B.scripted_model(stub)
        added = [0]

        def answer(body: dict[str, Any]) -> Any:
            clock.advance(CALL_SECONDS)
            if any(t.get("name") == "search_transcripts" for t in body.get("tools") or []):
                return dreamer(body)
            # a catch-up into a full folder (its index at 200 lines): the new fact goes into an existing
            # topic file, then the model ends its turn
            if not any(m.get("role") == "assistant" for m in body.get("messages") or []):
                added[0] += 1
                if stuck:
                    return stub.message(stub.memory("create", path=f"/memories/user_new_{added[0]}.md", file_text=(
                        f"---\nname: New {added[0]}\ndescription: a new fact\ntype: user\n---\nTabs.\n")))
                return stub.message(stub.memory("insert", path=f"/memories/user_topic_{4 * added[0]:03d}.md",
                                                insert_line=6, insert_text=f"- new fact {added[0]}: tabs\n"))
            return stub.message(stub.text("saved one"))

        stub.responder = answer
        claude = Path(tmp) / "claude"
        d = claude / "projects" / "-bench-night"
        d.mkdir(parents=True)
        B.make_folder(d / "memory", FILES, rng)
        index = d / "memory" / "MEMORY.md"  # a healthy folder: its index within budget (25,000 characters)
        index.write_text("".join(line[:110] + "\n" for line in index.read_text().splitlines()))
        os.utime(index, (B.OLD, B.OLD))
        p = Project("-bench-night", d, d / "memory")
        cfg = Config(model=replace(ModelConfig(), base_url=stub.base_url, max_retries=0, **(models or {})))
        if batch != "off":  # older versions have no model.batch: only set when asked
            cfg = replace(cfg, model=replace(cfg.model, batch=batch, batch_poll_s=0.05))
        unattended = {"unattended": True} if batch != "off" else {}  # the daemon's scheduled runs
        state = StateStore.open(Path(tmp) / "state")
        if candidates:
            plant_candidates(d / "memory", state, p.name, clock.time())
        phases: dict[str, dict[str, Any]] = {}
        outcomes: list[str] = []
        try:
            made = 0
            start = len(stub.requests)
            for n in SESSIONS_PER_RUN:
                for _ in range(n):
                    day = Path(tmp) / "new"
                    day.mkdir()
                    B.make_sessions(day, SESSION_BYTES, 1, rng)
                    (f,) = day.iterdir()  # the session file in the project's folder, quiet for an hour
                    dest = d / f"{made:08x}-0000-4000-8000-{made:012x}.jsonl"
                    os.replace(f, dest)
                    os.utime(dest, (clock.time() - 3600, clock.time() - 3600))
                    day.rmdir()
                    made += 1
                jc = JobContext(config=cfg, claude_dir=claude, state_dir=Path(tmp) / "state", state=state,
                                clock=clock, **unattended)
                out = catchup_project(jc, p)
                outcomes.append(out.outcome)
                clock.advance(2 * 3600)
            phases["catch-up"] = tally(stub.requests[start:])
            clock.advance(6 * 3600)  # the night
            start = len(stub.requests)
            jc = JobContext(config=cfg, claude_dir=claude, state_dir=Path(tmp) / "state", state=state,
                            clock=clock, force=True, **unattended)
            out = dream_project(jc, p)
            outcomes.append(out.outcome)
            phases["dream"] = tally(stub.requests[start:])
        finally:
            state.close()
    total = {k: (round(phases["catch-up"][k] + phases["dream"][k], 5) if k not in ("unpriced", "by_model")
                 else sorted(set(phases["catch-up"][k]) | set(phases["dream"][k])))
             for k in phases["dream"]}
    return {"catch-up": phases["catch-up"], "dream": phases["dream"], "night": total, "outcomes": outcomes,
            "models": {"catch-up": cfg.model.extract_model, "dream": cfg.model.dream_model}, "batch": batch}


def evidence_section(before: dict[str, Any] | None, after: dict[str, Any]) -> str:
    """The section for ``--candidates``: the night of "Cost per active project per night" with the dream's
    evidence planted in its folder, this version against the one before on the same folder."""
    d, n = after["dream"], after["night"]
    b = f" (before: ${before['dream']['usd']:.4f} and ${before['night']['usd']:.4f})" if before else ""
    return "\n".join([
        "## Cost per night with the dream's evidence", "",
        "Command: `.venv/bin/python bench/bench_cost.py --candidates --before before.json --write-docs` (before: "
        "the same script and flag with `MEMD_BENCH_ROOT` set to a checkout of the version before issue 31's "
        "evidence). The night of \"Cost per active project per night\" with evidence planted in its 200-file "
        "folder (`plant_candidates`): four files repeating another's body behind a vague description, three "
        "memories whose \"until\" date has passed, and 30 sessions that loaded the index and read every other "
        "file, so about a hundred are unused. The dream's first request carries the candidates (both files of "
        "each pair, each dated memory, bounded by `dream.evidence_max_chars`) and each manifest row its use "
        "figures. Tokens are the stand-in's estimate (characters / 4), the model is scripted and the same for "
        "both versions; figures are deterministic (no timing).", "",
        table(before, after), "",
        f"- The dream with its evidence: **${d['usd']:.4f}**, the night **${n['usd']:.4f}**{b}.",
        "- The night is the day's five catch-ups and the dream: the catch-ups are most of it and do not change "
        "here (the evidence is the dream's). Outcomes (after): " + ", ".join(after["outcomes"]) + ".",
        f"- Issue 31 asks for a night of at most $0.012 with the candidates: the dream alone (${d['usd']:.4f}) is "
        f"within it; the whole night (${n['usd']:.4f}) is not, before as after, by its catch-ups "
        f"(${after['catch-up']['usd']:.4f}), which this change does not touch.", ""])


def reprice(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc``'s dollars at this process's prices (a run of another version priced with its own table)."""
    for part in ("catch-up", "dream"):
        k = doc[part]
        k["usd"] = round(sum((n[0] * p["input"] + n[1] * p["cache_write"] + n[2] * p["cache_read"]
                              + n[3] * p["output"]) / 1e6
                             for m, n in k.get("by_model", {}).items() if (p := price(m)) is not None), 5)
    doc["night"]["usd"] = round(doc["catch-up"]["usd"] + doc["dream"]["usd"], 5)
    return doc


def table(before: dict[str, Any] | None, after: dict[str, Any]) -> str:
    rows = ["| part | version | calls | input (uncached) | cache write | cache read | output | $ at list prices |",
            "|---|---|---|---|---|---|---|---|"]
    for part in ("catch-up", "dream", "night"):
        for label, r in (("before", before), ("after", after)):
            if r is None:
                continue
            k = r[part]
            rows.append(f"| {part} | {label} | {k['calls']} | {k['input']:,} | {k['cache_write']:,} | "
                        f"{k['cache_read']:,} | {k['output']:,} | ${k['usd']:.4f} |")
    return "\n".join(rows)


def section(before: dict[str, Any] | None, after: dict[str, Any], also: dict[str, Any] | None = None,
            stuck: tuple[dict[str, Any], dict[str, Any]] | None = None) -> str:
    a = after["night"]["usd"]
    c, d = after["catch-up"], after["dream"]
    alt = ""
    if also is not None:
        alt = (f"- With `model.dream_model = \"{also['models']['dream']}\"` (and {also['models']['catch-up']} for "
               f"catch-ups) the same night costs **${also['night']['usd']:.4f}** (catch-ups "
               f"${also['catch-up']['usd']:.4f}, dream ${also['dream']['usd']:.4f}): over the target.")
    lines = [
        "## Cost per active project per night", "",
        "Command: `.venv/bin/python bench/bench_cost.py --before before.json --write-docs` (before: the same "
        "script with `MEMD_BENCH_ROOT` set to a checkout of the version before). One project, a 200-file "
        "folder, 10 sessions of ~100 KB finishing two by two before five of the day's twelve catch-ups (two "
        "hours apart in a virtual clock: no cache survives between runs), one dream at night; default models "
        f"({after['models']['catch-up']} for catch-ups, {after['models']['dream']} for the dream). Tokens are "
        "the stand-in's estimate (characters / 4 of the request JSON), caching follows Anthropic's documented "
        "rules (breakpoints, the 20-block lookback, each model's minimum cacheable length, five-minute "
        "lifetime), the model is scripted (the same for both versions, no thinking tokens) and dollars are "
        "this checkout's list prices for both versions (`bench/bench_cost.py`'s docstring).", "",
        table(before, after), "",
        f"- After: **${a:.4f} per active project per night** (target ≤ $0.05)"
        + (f"; before: ${before['night']['usd']:.4f}." if before else "."),
        "- Outcomes of the runs (after): " + ", ".join(after["outcomes"]) + ".",
        f"- Where it goes: the catch-ups ${c['usd']:.4f} ({c['calls']} calls: each 100 KB session is one "
        "conversation whose first call writes the manifest and the span to the cache at 1.25x and whose second "
        f"reads it at 0.1x), the dream ${d['usd']:.4f} (its orientation of a 200-file folder, index and "
        "manifest, written once at 1.25x and read by its later calls). Every input token is "
        "written or read: nothing is sent uncached.",
        "- What changed it: the default models (Haiku 5.5 for catch-ups and dreams, `docs/model-jobs.md`, "
        "\"Default models\"): the same tokens at a tenth of Haiku 4.5's price for the catch-ups and a twentieth "
        "of Sonnet 5.5's for the dream. The other changes of this branch do not show in this night: a dream is "
        "handed the text of the files changed since the last dream (here five small files; the scripted dreamer "
        "views its four files anyway), a dream with nothing changed and a healthy index calls no model, and a "
        "conversation's last allowed call or a one-call run writes nothing to the cache (every conversation "
        "here makes two calls of five allowed).",
        "- Not measured here: thinking. Haiku 5.5 thinks by default (adaptive, output price $0.50 per million "
        "tokens); the scripted model returns none. A real catch-up thinking 1,000 tokens a call adds $0.01 to "
        "this night. Haiku 5.5's tokenizer counts about 30% more tokens than Haiku 4.5's for the same text "
        "(Anthropic's model page); the stand-in counts characters / 4 for every model.",
        *([alt] if alt else []),
        *([f"- A stuck project (`--stuck`: every catch-up that saves a new file is refused by the full index), "
           f"the same day: before **${stuck[0]['catch-up']['usd']:.4f}** in catch-ups ({stuck[0]['catch-up']['calls']}"
           f" calls), after **${stuck[1]['catch-up']['usd']:.4f}** ({stuck[1]['catch-up']['calls']} calls)."]
          if stuck else []),
        "",
    ]
    return "\n".join(lines)


def batch_section(off: dict[str, Any], auto: dict[str, Any], cold: dict[str, Any]) -> str:
    """The night with ``model.batch`` off and auto, measured in one run (off is the baseline); ``cold``:
    auto with batched requests outside the cache (the worst case of Anthropic's best effort)."""
    rows = ["| part | model.batch | calls | batched | input (uncached) | cache write | cache read | output | "
            "$ at list prices | vs off |", "|---|---|---|---|---|---|---|---|---|---|"]
    for part in ("catch-up", "dream", "night"):
        for label, r in (("off", off), ("auto", auto), ("auto, batches uncached", cold)):
            k = r[part]
            ratio = k["usd"] / off[part]["usd"] if off[part]["usd"] else 0.0
            rows.append(f"| {part} | {label} | {k['calls']} | {k.get('batched', 0)} | {k['input']:,} | "
                        f"{k['cache_write']:,} | {k['cache_read']:,} | {k['output']:,} | ${k['usd']:.4f} | "
                        f"{ratio:.2f}x |")
    a, o, c = auto["night"]["usd"], off["night"]["usd"], cold["night"]["usd"]
    return "\n".join([
        "## Cost per night with Message Batches", "",
        "Command: `.venv/bin/python bench/bench_cost.py --batch both --write-docs`. The night of \"Cost per active "
        "project per night\" run twice in one process, as the daemon's scheduled runs (no one waits on them): "
        "`model.batch = off`, the baseline, and `auto`, where the first call of each catch-up conversation and "
        "of the dream is a Message Batch billed at half the list price (`bench/bench_cost.py`'s docstring). The "
        "stand-in ends a batch at its first poll. Anthropic caches batched requests on a best-effort basis, so "
        "`auto` is measured twice: with a batched request cached as a call is (it writes the prefix its "
        "conversation's next calls read), and with batched requests outside the cache (all their input "
        "uncached; the next call writes the prefix itself): the real night lies between the two.", "",
        "\n".join(rows), "",
        f"- With `model.batch = auto`: **${a:.4f} per active project per night** ({a / o:.2f}x of ${o:.4f} with "
        f"`off`), **${c:.4f}** ({c / o:.2f}x) if no batched request touches the cache. Outcomes (auto): "
        + ", ".join(auto["outcomes"]) + ".",
        "- Only each conversation's first call is batched (the rest of its tool loop needs each reply at once), "
        "so the saving is half of what those first calls cost: in a catch-up, the call that writes the "
        "manifest and the span to the cache; in the dream, the one that writes its orientation. Uncached, a "
        "first call pays 0.5x the input price instead of 1.25x, and the next call writes the prefix at 1.25x "
        "instead of reading it at 0.1x: a loss, which `auto` sees (it judges each batched call by whether the "
        "next call read its cache) and stops after three misses in a row per model, but for one probe a week "
        "(`memd/llm/batch.py`). The uncached row is the first day from a fresh state (three catch-up misses in "
        "the first runs, the dream's one); from then on an uncached world costs the `off` night, plus one "
        "probe a week per model.",
        "",
    ])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, help="the JSON this script printed on the version before")
    ap.add_argument("--write-docs", action="store_true", help="write the table into docs/benchmarks.md")
    ap.add_argument("--stuck-pair", type=Path, nargs=2, metavar=("BEFORE", "AFTER"),
                    help="the JSON of --stuck runs before and after, to cite")
    ap.add_argument("--stuck", action="store_true", help="the stuck project's day (catch-ups refused) instead")
    ap.add_argument("--also", type=Path, help="the JSON of another run of this script (other models) to cite")
    ap.add_argument("--extract-model", help="another model.extract_model (default: the config's)")
    ap.add_argument("--dream-model", help="another model.dream_model (default: the config's)")
    ap.add_argument("--candidates", action="store_true",
                    help="plant the dream's evidence (issue 31) in the folder: duplicates, passed dates, unused files")
    ap.add_argument("--batch", choices=("off", "auto", "both"), default="off",
                    help="model.batch for the day's scheduled runs; both: off and auto in one run, compared")
    args = ap.parse_args()
    os.environ["ANTHROPIC_API_KEY"] = "bench"
    os.environ.pop("ANTHROPIC_BASE_URL", None)
    t0 = time.monotonic()
    models = {k: v for k, v in (("extract_model", args.extract_model), ("dream_model", args.dream_model)) if v}
    after = night(models=models, stuck=args.stuck, batch="auto" if args.batch == "auto" else "off",
                  **({"candidates": True} if args.candidates else {}))
    print(json.dumps(after, indent=1))
    print(f"({time.monotonic() - t0:.1f} s)", file=sys.stderr)
    if args.batch == "both":
        auto = night(models=models, stuck=args.stuck, batch="auto")
        cold = night(models=models, stuck=args.stuck, batch="auto", batch_caches=False)
        print(json.dumps({"batch_auto": auto, "batch_auto_uncached": cold}, indent=1))
        text = batch_section(after, auto, cold)
        print(text, file=sys.stderr)
        if args.write_docs and not args.stuck:
            B.write_section(text, "## Cost per night with Message Batches")
        return 0
    before = reprice(json.loads(args.before.read_text())) if args.before else None
    pair = (reprice(json.loads(args.stuck_pair[0].read_text())), reprice(json.loads(args.stuck_pair[1].read_text()))
            ) if args.stuck_pair else None
    if args.candidates:
        text = evidence_section(before, after)
        print(text, file=sys.stderr)
        if args.write_docs:
            B.write_section(text, "## Cost per night with the dream's evidence")
        return 0
    text = section(before, after, reprice(json.loads(args.also.read_text())) if args.also else None, pair)
    print(text, file=sys.stderr)
    if args.write_docs and not args.stuck:
        B.write_section(text, "## Cost per active project per night")
    return 0


if __name__ == "__main__":
    sys.exit(main())
