"""Model jobs through the local Messages API stub: input tokens per catch-up and per dream as the
memory folder and the transcript volume grow, the cache share, and the cost per project per night.

    .venv/bin/python bench/bench_llm.py [--write-docs]

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
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memd.config import Config, ModelConfig, replace  # noqa: E402
from memd.jobs import JobContext, ProjectOutcome  # noqa: E402
from memd.jobs.catchup import catchup_project  # noqa: E402
from memd.jobs.dream import dream_project  # noqa: E402
from memd.layout import Project  # noqa: E402
from memd.llm import client as llm  # noqa: E402
from memd.state import StateStore  # noqa: E402
from tests.plugins.stub_api import StubAPI  # noqa: E402

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


def context(stub: StubAPI, claude: Path, state_dir: Path, state: StateStore, force: bool = True) -> JobContext:
    cfg = Config(model=replace(ModelConfig(), base_url=stub.base_url, max_retries=0))
    return JobContext(config=cfg, claude_dir=claude, state_dir=state_dir, state=state, force=force)


def script_dream(stub: StubAPI, n_files: int) -> None:
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
            s.memory("delete", path=f[1])),
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


def summarize(stub: StubAPI, out: ProjectOutcome) -> dict[str, Any]:
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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write-docs", action="store_true")
    ap.add_argument("--big-mb", type=float, default=40.0, help="largest transcript volume behind a dream")
    args = ap.parse_args()
    os.environ["ANTHROPIC_API_KEY"] = "bench"
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
        doc = ROOT / "docs" / "benchmarks.md"
        old = doc.read_text() if doc.exists() else "# Benchmarks\n"
        start = old.find("## Model jobs")
        if start >= 0:
            end = old.find("\n## ", start + 5)
            old = old[:start] + (old[end + 1:] if end >= 0 else "")
        doc.write_text(old.rstrip("\n") + "\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
