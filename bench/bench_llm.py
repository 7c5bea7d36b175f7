"""Model jobs through the local Messages API stub: input tokens per catch-up and per dream as the
memory folder and the transcript volume grow, the cache share, and the cost per project per night.

    .venv/bin/python bench/bench_llm.py [--write-docs]

Tokens per run, before and after (the four token kinds of a few fixed runs, with a scripted model
that answers what it is sent, so the same model drives any version of memd):

    MEMD_BENCH_ROOT=/work/wt-before /work/wt-before/.venv/bin/python bench/bench_llm.py --tokens > before.json
    .venv/bin/python bench/bench_llm.py --tokens --before before.json --write-docs

``MEMD_BENCH_ROOT`` imports memd from another checkout; the stub is always this checkout's.

Tokens are the stub's estimate: characters / 4 of the JSON of tools, system and messages (not
Anthropic's tokenizer; newer models count about 30% more tokens for the same text). The stub
simulates prompt caching from the requests' cache_control breakpoints (a prefix seen before and
at least 1,024 tokens long is a cache read). "Uncached" = input_tokens + cache writes, the part
billed at or above the full input price. The model's replies are scripted (a realistic sequence
of memory tool calls), so what is measured is what memd sends, which is what memd controls.
Cost uses the list prices in the config (model.prices) for model.extract_model (catch-up) and
model.dream_model (dream).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MEMD_ROOT = Path(os.environ.get("MEMD_BENCH_ROOT") or ROOT)  # whose memd is measured
sys.path.insert(0, str(MEMD_ROOT))


def _load_stub() -> Any:
    """This checkout's stub, whichever memd is measured (the same stub for before and after)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("memd_bench_stub", ROOT / "tests" / "plugins" / "stub_api.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["memd_bench_stub"] = mod
    spec.loader.exec_module(mod)
    return mod


from memd.config import Config, ModelConfig, replace  # noqa: E402
from memd.jobs import JobContext, ProjectOutcome  # noqa: E402
from memd.jobs.catchup import catchup_project  # noqa: E402
from memd.jobs.dream import dream_project  # noqa: E402
from memd.layout import Project  # noqa: E402
from memd.llm import client as llm  # noqa: E402
from memd.state import StateStore  # noqa: E402

_stub = _load_stub()
StubAPI = _stub.StubAPI

OLD = time.time() - 3 * 86400
WORDS = ["deploy", "release", "staging", "review", "tabs", "spaces", "linter", "user", "prefers", "go", "rust",
         "python", "meeting", "thursday", "friday", "freeze", "incident", "dashboard", "grafana", "ticket",
         "owner", "api", "schema", "cache", "budget"]


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def make_folder(mem: Path, n: int, rng: random.Random) -> None:
    mem.mkdir(parents=True)
    lines: list[str] = []
    types = ("user", "feedback", "project", "reference")
    for i in range(n):
        t = types[i % 4]
        name = f"{t}_topic_{i:03d}.md"
        desc = words(rng, 10)
        body = words(rng, 120) + "\n\n**Why:** " + words(rng, 20) + "\n**How to apply:** " + words(rng, 20)
        (mem / name).write_text(f"---\nname: Topic {i}\ndescription: {desc}\ntype: {t}\n---\n{body}\n")
        lines.append(f"- [Topic {i}]({name}) — {desc}"[:150])
    (mem / "MEMORY.md").write_text("\n".join(lines) + "\n")
    for p in mem.iterdir():
        os.utime(p, (OLD, OLD))


def make_sessions(folder: Path, total_bytes: int, n: int, rng: random.Random) -> None:
    per = max(1, total_bytes // max(1, n))
    for s in range(n):
        sid = f"{s:08x}-0000-4000-8000-{s:012x}"
        path = folder / f"{sid}.jsonl"
        size = 0
        i = 0
        with path.open("w") as f:
            while size < per:
                ts = f"2026-03-{1 + i % 27:02d}T10:{i % 60:02d}:00Z"
                if i % 2 == 0:
                    rec: dict[str, Any] = {"type": "user", "uuid": f"u{i}", "sessionId": sid, "timestamp": ts,
                                           "message": {"role": "user", "content": words(rng, 60)}}
                else:
                    rec = {"type": "assistant", "uuid": f"a{i}", "sessionId": sid, "timestamp": ts,
                           "message": {"id": f"m{i}", "role": "assistant",
                                       "content": [{"type": "text", "text": words(rng, 120)}]}}
                line = json.dumps(rec) + "\n"
                f.write(line)
                size += len(line)
                i += 1
        os.utime(path, (OLD, OLD))


def context(stub: Any, claude: Path, state_dir: Path, state: StateStore, force: bool = True) -> JobContext:
    """Jobs against the stub, or (``stub`` None) against the API the environment's credential reaches."""
    cfg = Config(model=replace(ModelConfig(), base_url=stub.base_url, max_retries=0)) if stub is not None \
        else Config()
    return JobContext(config=cfg, claude_dir=claude, state_dir=state_dir, state=state, force=force)


def script_dream(stub: Any, n_files: int) -> None:
    s = stub
    f = [f"/memories/{('user', 'feedback', 'project', 'reference')[i % 4]}_topic_{i:03d}.md"
         for i in range(min(n_files, 8))]
    s.script(
        s.message(s.memory("view", path=f[0]), s.memory("view", path=f[1]),
                  s.tool_use("search_transcripts", {"pattern": "deploy freeze"})),
        s.message(s.memory("view", path=f[2]), s.memory("view", path=f[3]),
                  s.tool_use("search_transcripts", {"pattern": "grafana|dashboard"})),
        s.message(s.memory("create", path="/memories/project_merged.md", file_text=(
            "---\nname: Merged\ndescription: merged topics 0 and 1\ntype: project\n---\n" + "merged fact. " * 40)),
            s.memory("delete", path=f[1], reason="dup")),
        s.message(s.text("Merged two topics; nothing else needed.")),
    )


def run_dream(n_files: int, transcript_bytes: int, rng: random.Random) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, StubAPI() as stub:
        claude = Path(tmp) / "claude"
        proj = claude / "projects" / "-bench-app"
        proj.mkdir(parents=True)
        make_folder(proj / "memory", n_files, rng)
        if transcript_bytes:
            make_sessions(proj, transcript_bytes, max(1, transcript_bytes // 2_000_000), rng)
        state = StateStore.open(Path(tmp) / "state")
        try:
            script_dream(stub, n_files)
            out = dream_project(context(stub, claude, Path(tmp) / "state", state), Project("-bench-app", proj,
                                                                                          proj / "memory"))
        finally:
            state.close()
        return summarize(stub, out)


def run_catchup(n_files: int, span_bytes: int, sessions: int, rng: random.Random) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, StubAPI() as stub:
        claude = Path(tmp) / "claude"
        proj = claude / "projects" / "-bench-app"
        proj.mkdir(parents=True)
        make_folder(proj / "memory", n_files, rng)
        make_sessions(proj, span_bytes * sessions, sessions, rng)
        s = stub
        for i in range(sessions):
            s.script(s.message(s.memory("create", path=f"/memories/user_new_{i}.md", file_text=(
                f"---\nname: New {i}\ndescription: a new fact {i}\ntype: user\n---\nThe user prefers tabs.\n"))),
                s.message(s.text("saved one")))
        state = StateStore.open(Path(tmp) / "state")
        try:
            out = catchup_project(context(stub, claude, Path(tmp) / "state", state),
                                  Project("-bench-app", proj, proj / "memory"))
        finally:
            state.close()
        return summarize(stub, out)


def summarize(stub: Any, out: ProjectOutcome) -> dict[str, Any]:
    usages = [r.usage for r in stub.requests if r.usage is not None]
    uncached = sum(u["input_tokens"] + u["cache_creation_input_tokens"] for u in usages)
    read = sum(u["cache_read_input_tokens"] for u in usages)
    second = usages[1] if len(usages) > 1 else None
    share2 = (second["cache_read_input_tokens"] / max(1, second["input_tokens"] + second["cache_creation_input_tokens"]
                                                       + second["cache_read_input_tokens"])) if second else 0.0
    biggest = max((len(r.raw) for r in stub.requests), default=0)
    return {"outcome": out.outcome, "calls": len(usages), "uncached": uncached, "cache_read": read,
            "total": uncached + read, "second_call_cache_share": share2, "cost": out.cost_usd,
            "largest_request_bytes": biggest, "message": out.message}


# --------------------------------------------------------------------------- tokens per run


def scripted_model(stub: Any) -> Any:
    """A model that answers what it is sent, the same for any version of memd: a catch-up
    conversation saves one memory and ends; a dream views four files and searches twice over two
    turns, merges one file, then ends (fewer turns when the conversation is capped)."""
    made = [0]

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        msgs = body.get("messages") or []
        turn = sum(1 for m in msgs if m.get("role") == "assistant")
        names = {t.get("name") for t in body.get("tools") or []}
        if "search_transcripts" not in names:  # a catch-up conversation
            if turn == 0:
                made[0] += 1
                return stub.message(stub.memory("create", path=f"/memories/user_new_{made[0]}.md", file_text=(
                    f"---\nname: New {made[0]}\ndescription: a new fact {made[0]}\ntype: user\n---\n"
                    "The user prefers tabs.\n")))
            return stub.message(stub.text("saved one"))
        f = [f"/memories/{('user', 'feedback', 'project', 'reference')[i % 4]}_topic_{i:03d}.md" for i in range(4)]
        if turn == 0:
            return stub.message(stub.memory("view", path=f[0]), stub.memory("view", path=f[1]),
                                stub.tool_use("search_transcripts", {"pattern": "deploy freeze"}))
        if turn == 1:
            return stub.message(stub.memory("view", path=f[2]), stub.memory("view", path=f[3]),
                                stub.tool_use("search_transcripts", {"pattern": "grafana|dashboard"}))
        if turn == 2:
            return stub.message(stub.memory("create", path="/memories/project_merged.md", file_text=(
                "---\nname: Merged\ndescription: merged topics 0 and 1\ntype: project\n---\n"
                + "merged fact. " * 40)), stub.memory("delete", path=f[1], reason="dup"))
        return stub.message(stub.text("Merged two topics; nothing else needed."))

    return answer


def _kinds(out: ProjectOutcome, calls: int) -> dict[str, Any]:
    return {"outcome": out.outcome, "calls": calls, "tokens_in": out.tokens_in, "cache_write": out.cache_write,
            "cache_read": out.cache_read, "tokens_out": out.tokens_out,
            "total": out.tokens_in + out.cache_write + out.cache_read + out.tokens_out, "cost": out.cost_usd}


def tokens_per_run(real: bool = False) -> dict[str, dict[str, Any]]:
    """The four token kinds of fixed runs, each with a fresh folder and the scripted model (``real``:
    the configured models through the real API instead: costs money, replies vary)."""
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        stub = None if real else stack.enter_context(StubAPI())
        if stub is not None:
            stub.responder = scripted_model(stub)
        claude = Path(tmp) / "claude"
        state = StateStore.open(Path(tmp) / "state")
        try:
            def project(name: str, files: int) -> Project:
                d = claude / "projects" / name
                d.mkdir(parents=True)
                make_folder(d / "memory", files, random.Random(name))  # each project its own memories
                return Project(name, d, d / "memory")

            def run(label: str, job: Any, p: Project) -> None:
                n = len(stub.requests) if stub is not None else 0
                out = job(context(stub, claude, Path(tmp) / "state", state), p)
                rows[label] = _kinds(out, len(stub.requests) - n if stub is not None
                                     else out.details.get("model_calls", 0))
                print(f"{label}: {rows[label]}", file=sys.stderr, flush=True)

            p = project("-bench-long", 50)
            make_sessions(p.dir, 100_000, 1, random.Random(11))
            run("catch-up: one 100 KB session, 50 files", catchup_project, p)
            p = project("-bench-short", 50)
            make_sessions(p.dir, 9_000, 3, random.Random(12))
            run("catch-up: three 3 KB sessions, 50 files", catchup_project, p)
            p = project("-bench-dream-a", 200)
            make_sessions(p.dir, 5_000_000, 2, random.Random(13))
            run("dream: 200 files, 5 MB of transcripts", dream_project, p)
            p = project("-bench-dream-b", 200)
            make_sessions(p.dir, 5_000_000, 2, random.Random(14))
            run("dream: a second project of the same night", dream_project, p)
        finally:
            state.close()
    return rows


def tokens_section(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> str:
    head = ("| run | version | calls | tokens_in (uncached) | cache_write | cache_read | tokens_out | total | cost |\n"
            "|---|---|---|---|---|---|---|---|---|")
    rows = [head]
    for label, a in after.items():
        for version, r in (("before", before.get(label)), ("after", a)):
            if r is None:
                continue
            rows.append(f"| {label} | {version} | {r['calls']} | {r['tokens_in']:,} | {r['cache_write']:,} | "
                        f"{r['cache_read']:,} | {r['tokens_out']:,} | {r['total']:,} | ${r['cost']:.4f} |")
    return "\n".join([
        "## Tokens per run", "",
        "Stub figures, not the API's: the real SDK against the local stub, whose token counts are its own "
        "estimate (characters / 4 of the request's JSON, not Anthropic's tokenizer) and whose prompt cache is "
        "simulated from the requests' `cache_control` breakpoints (a prefix of at least 1,024 tokens seen before "
        "is a cache read). The model is scripted and answers what it is sent (`scripted_model` in "
        "`bench/bench_llm.py`: a catch-up conversation saves one memory; a dream views four files and searches "
        "twice over two turns, merges one file, then ends), so the same model drives both versions. Before is "
        "commit 0a99332 (a checkout with its own venv), after is this branch; both with the default config; "
        "each project has its own folder of generated memories (the counts do not depend on the machine).", "",
        "    MEMD_BENCH_ROOT=/path/to/checkout-of-0a99332 /path/to/its/.venv/bin/python bench/bench_llm.py "
        "--tokens > before.json",
        "    .venv/bin/python bench/bench_llm.py --tokens --before before.json --write-docs", "",
        *rows, "",
        "- The catch-up of three short sessions is one conversation now (batched: each span renders within "
        "8,000 characters), so the instructions and the manifest are sent and cached once, not once per session.",
        "- The shared instructions carry their own breakpoint: a second project's dream in the same night reads "
        "tools + instructions from the cache; its manifest is its own.",
        "- The prompts are longer (they state the budgets, the forget rule, topics not diaries, CLAUDE.md), "
        "which costs a few hundred tokens per conversation, mostly read from the cache.",
        "- `tokens_in` is the uncached input only; `total` is what the run sent and received (the run log's "
        "`tokens_total`). With a real model the counts differ (its tokenizer, its own replies and tool use). "
        "The same runs against the real API with the configured models (costs money; not measured here, no key "
        "was available): `ANTHROPIC_API_KEY=... .venv/bin/python bench/bench_llm.py --tokens --real`; the "
        "eval's real tier reports pass rates and costs: `ANTHROPIC_API_KEY=... .venv/bin/python "
        "bench/eval_quality.py --real --repeat 3`.",
        ""])


def write_section(text: str, title: str) -> None:
    doc = ROOT / "docs" / "benchmarks.md"
    old = doc.read_text() if doc.exists() else "# Benchmarks\n"
    start = old.find(title)
    if start >= 0:
        end = old.find("\n## ", start + 5)
        old = old[:start] + (old[end + 1:] if end >= 0 else "")
    doc.write_text(old.rstrip("\n") + "\n\n" + text)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write-docs", action="store_true")
    ap.add_argument("--big-mb", type=float, default=40.0, help="largest transcript volume behind a dream")
    ap.add_argument("--tokens", action="store_true", help="only the tokens per run (JSON on stdout)")
    ap.add_argument("--before", type=Path, help="with --tokens: the JSON of the same run on the version before")
    ap.add_argument("--real", action="store_true",
                    help="with --tokens: the real API with the configured models (needs a credential; costs money)")
    args = ap.parse_args()
    if args.real:
        if not args.tokens or not os.environ.get("ANTHROPIC_API_KEY"):
            sys.exit("--real goes with --tokens and needs ANTHROPIC_API_KEY")
    else:
        os.environ["ANTHROPIC_API_KEY"] = "bench"
        os.environ.pop("ANTHROPIC_BASE_URL", None)
    if args.tokens:
        after = tokens_per_run(args.real)
        print(json.dumps(after, indent=1))
        if args.before is not None:
            section = tokens_section(json.loads(args.before.read_text()), after)
            print(section, file=sys.stderr)
            if args.write_docs:
                write_section(section, "## Tokens per run")
        return 0
    rng = random.Random(7)
    cfg = Config()
    rows: list[str] = []

    # dream: folder size x transcript volume
    dream: dict[tuple[int, int], dict[str, Any]] = {}
    for n in (10, 50, 200, 1000):
        for mb in (0.0, args.big_mb / 8, args.big_mb):
            dream[(n, int(mb))] = r = run_dream(n, int(mb * 1e6), rng)
            print(f"dream files={n} transcripts={mb}MB: {r}", flush=True)
    base = dream[(10, 0)]
    rows.append("| dream: files | transcripts | calls | uncached input | cache reads | total input | "
                "vs 10 files, 0 MB | 2nd-call cache share | cost |")
    rows.append("|---|---|---|---|---|---|---|---|---|")
    for (n, mb), r in dream.items():
        rows.append(f"| {n} | {mb:g} MB | {r['calls']} | {r['uncached']:,} | {r['cache_read']:,} | {r['total']:,} | "
                    f"{r['total'] / base['total']:.2f}x | {r['second_call_cache_share']:.0%} | ${r['cost']:.4f} |")

    # catch-up: span size and sessions
    catch: dict[tuple[int, int], dict[str, Any]] = {}
    for span_kb, sessions in ((10, 1), (100, 1), (1000, 1), (10_000, 1), (100, 5), (100, 20)):
        catch[(span_kb, sessions)] = r = run_catchup(50, span_kb * 1000, sessions, rng)
        print(f"catchup span={span_kb}KB sessions={sessions}: {r}", flush=True)
    cbase = catch[(10, 1)]
    crows = ["| catch-up: span per session | sessions | calls | uncached input | cache reads | total input | "
             "vs 10 KB x 1 | cost |", "|---|---|---|---|---|---|---|---|"]
    for (kb, n), r in catch.items():
        crows.append(f"| {kb:,} KB | {n} | {r['calls']} | {r['uncached']:,} | {r['cache_read']:,} | {r['total']:,} | "
                     f"{r['total'] / cbase['total']:.2f}x | ${r['cost']:.4f} |")

    # a night: 12 catch-up runs (every 2 hours) over a day of 10 sessions of ~100 KB, and one dream
    per_session = catch[(100, 5)]["cost"] / 5
    day = 10 * per_session + dream[(200, int(args.big_mb))]["cost"]
    worst_catchup = 12 * cfg.catchup.max_input_tokens * llm.price_for(cfg, cfg.model.extract_model)["input"] / 1e6  # type: ignore[index]
    d200 = dream[(200, int(args.big_mb))]
    text = "\n".join([
        "## Model jobs", "",
        "Command: `.venv/bin/python bench/bench_llm.py --write-docs` (the real SDK against the local stub; "
        "tokens are the stub's chars/4 estimate, not Anthropic's tokenizer; prompt caching simulated from the "
        "requests' cache_control breakpoints; the model's tool calls scripted: 4 views, 2 transcript searches, "
        "1 merge, 1 delete per dream; 1 memory created per catch-up session).", "",
        *rows, "",
        *crows, "",
        f"- Dream of a 200-file folder with {args.big_mb:g} MB of transcripts behind it: **{d200['uncached']:,} "
        f"uncached input tokens** (target < 30,000), **{d200['total']:,} with cache reads** (target < 150,000). "
        f"Transcript volume changes the dream's input by "
        f"{dream[(200, int(args.big_mb))]['total'] / dream[(200, 0)]['total']:.2f}x (only the searches' "
        "<= 50 short lines reach the model).",
        f"- Folder size: a 1,000-file folder costs {dream[(1000, 0)]['total'] / dream[(200, 0)]['total']:.2f}x a "
        "200-file one (the manifest lists the newest `budget.max_topic_files` files, the index is handed in "
        "cut at 30,000 characters). Every dream above ended "
        f"{'/'.join(sorted({r['outcome'] for r in dream.values()}))}.",
        f"- Catch-up input per session is bounded by `transcripts.render_max_chars` (a 10 MB span costs "
        f"{catch[(10_000, 1)]['total'] / catch[(1000, 1)]['total']:.2f}x a 1 MB span) and per run by "
        f"`catchup.max_sessions` and `catchup.max_input_tokens` (20 sessions: {catch[(100, 20)]['calls']} calls).",
        f"- Cache share of the second call of a run: {d200['second_call_cache_share']:.0%} (dream, 200 files), "
        f"{catch[(100, 5)]['second_call_cache_share']:.0%} (catch-up).",
        f"- Estimated cost per project per night at list prices ({cfg.model.extract_model} for catch-up, "
        f"{cfg.model.dream_model} for the dream): **${day:.3f}** for a day of 10 sessions of ~100 KB and one dream "
        f"of a 200-file folder; the catch-up's hard ceiling is 12 runs x {cfg.catchup.max_input_tokens:,} "
        f"input tokens = ${worst_catchup:.2f}/day.",
        "",
    ])
    print(text)
    if args.write_docs:
        write_section(text, "## Model jobs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
