"""Wall time of `memd hook` per event, as a ratio to a bare interpreter start in the same run.

A hook runs on every matching tool call, so its start-up is paid constantly (facts.md section 5).
Measured: the installed console script and ``python -m memd hook``, for PreToolUse and PostToolUse
events on a file outside memory (the common case: most writes are not memory writes) and on a
memory file (the guarded case: config, index and secret scan), against ``python -c pass``.
Runs are interleaved round-robin so drift on a shared machine hits every variant alike.

memd's modules are byte-compiled first (as pip does on install) and the runs may write bytecode:
an environment with PYTHONDONTWRITEBYTECODE=1 would otherwise compile every module on every run.
"lean door" is ``memd.hooks.entry.main`` called without importing ``memd.cli`` first: what the
console script would cost if its entry point sent ``hook`` straight there.

"plain venv" runs what pip's console script runs (``import re, sys; from memd.__main__ import main``)
with a fresh venv's interpreter, memd on PYTHONPATH, against ``python -c pass`` of that venv: a regular
(non-editable) install, whose start-up does not run the editable install's finder (which imports
pathlib and importlib.util for every interpreter of the dev venv, baseline included).

    .venv/bin/python bench/bench_hook.py [--runs 30] [--write-docs]

--write-docs replaces the "## Hooks" section of docs/benchmarks.md with this run's figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
DOC = ROOT / "docs" / "benchmarks.md"
EVENTS = ("PreToolUse, other file", "PostToolUse, other file", "PreToolUse, memory file",
          "PostToolUse, memory file")


def events(memory: Path, elsewhere: Path) -> dict[str, bytes]:
    def ev(name: str, path: Path, **extra: object) -> bytes:
        return json.dumps({
            "session_id": "0b0e8f4e-6a47-4a5c-9f51-3d2f0e1c2a11", "transcript_path": "/dev/null",
            "cwd": str(elsewhere.parent), "permission_mode": "default", "hook_event_name": name,
            "tool_name": "Write", "tool_use_id": "toolu_bench",
            "tool_input": {"file_path": str(path), "content": "# notes\n\nplain text, nothing secret\n" * 20},
            **extra}).encode()

    return {
        "PreToolUse, other file": ev("PreToolUse", elsewhere),
        "PostToolUse, other file": ev("PostToolUse", elsewhere, tool_response={"success": True}),
        "PreToolUse, memory file": ev("PreToolUse", memory / "feedback_x.md"),
        "PostToolUse, memory file": ev("PostToolUse", memory / "feedback_x.md", tool_response={"success": True}),
    }


def timed(cmd: list[str], stdin: bytes, env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                          check=False)
    took = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{cmd} exited {proc.returncode}")
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--write-docs", action="store_true", help="rewrite the Hooks section of docs/benchmarks.md")
    args = ap.parse_args()
    script = BIN / "memd"
    if not script.exists():
        raise SystemExit(f"no console script at {script}: pip install -e . first")
    tmp = Path(tempfile.mkdtemp(prefix="memd-bench-"))
    try:
        home = tmp / "home"
        memory = home / ".claude" / "projects" / "-home-dev-app" / "memory"
        memory.mkdir(parents=True)
        index = "".join(f"- [Entry {i}](topic_{i}.md) — a one-line hook about entry {i}\n" for i in range(120))
        (memory / "MEMORY.md").write_text(index)
        (memory / "feedback_x.md").write_text("---\nname: x\ndescription: d\ntype: feedback\n---\nbody\n")
        elsewhere = home / "src" / "app" / "main.py"
        elsewhere.parent.mkdir(parents=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "MEMD"))}
        env.update(HOME=str(home), XDG_STATE_HOME=str(home / ".state"), XDG_CONFIG_HOME=str(home / ".config"))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        py = sys.executable
        subprocess.run([py, "-m", "compileall", "-q", str(ROOT / "memd")], env=env, check=True,
                       stdout=subprocess.DEVNULL)
        plain = tmp / "plain-venv"
        base_py = getattr(sys, "_base_executable", py)
        subprocess.run([base_py, "-m", "venv", "--without-pip", str(plain)], env=env, check=True)
        plain_py = str(plain / "bin" / "python")
        plain_env = {**env, "PYTHONPATH": str(ROOT)}
        lean = "import sys; from memd.hooks.entry import main; sys.exit(main(sys.argv[1:]))"
        console = "import re, sys; from memd.__main__ import main; sys.argv[0] = 'memd'; sys.exit(main())"
        variants: dict[str, tuple[list[str], bytes, dict[str, str]]] = {
            "python -c pass": ([py, "-c", "pass"], b"", env),
            "plain venv: python -c pass": ([plain_py, "-c", "pass"], b"", plain_env)}
        for label, data in events(memory, elsewhere).items():
            variants[f"memd hook (script): {label}"] = ([str(script), "hook"], data, env)
            variants[f"python -m memd hook: {label}"] = ([py, "-m", "memd", "hook"], data, env)
            variants[f"lean door: {label}"] = ([py, "-c", lean], data, env)
            variants[f"plain venv: {label}"] = ([plain_py, "-c", console, "hook"], data, plain_env)
        for cmd, data, venv in variants.values():  # warm the page cache and .pyc files
            timed(cmd, data, venv)
        samples: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(args.runs):
            for label, (cmd, data, venv) in variants.items():
                samples[label].append(timed(cmd, data, venv))
        med = {k: statistics.median(xs) for k, xs in samples.items()}
        print(f"runs: {args.runs} each, interleaved; python {sys.version.split()[0]}; {os.cpu_count()} CPUs")
        print(f"{'variant':<58} {'median ms':>10} {'ratio':>7}")
        for label, m in med.items():
            base = med["plain venv: python -c pass" if label.startswith("plain venv") else "python -c pass"]
            print(f"{label:<58} {m * 1000:>10.1f} {m / base:>6.2f}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.write_docs:
        write_docs(med, args.runs)
        print(f"wrote the Hooks section of {DOC}")
    return 0


def write_docs(med: dict[str, float], runs: int) -> None:
    base = med["python -c pass"]
    pbase = med["plain venv: python -c pass"]

    def cell(label: str, bold: bool = False) -> str:
        ratio = f"{med[label] / (pbase if label.startswith('plain venv') else base):.2f}x"
        return f"{med[label] * 1000:.1f} ms, " + (f"**{ratio}**" if bold else ratio)

    rows = [f"| {e} | {cell(f'memd hook (script): {e}', True)} | {cell(f'python -m memd hook: {e}')} "
            f"| {cell(f'lean door: {e}')} | {cell(f'plain venv: {e}')} |" for e in EVENTS]
    common = max(med[f"memd hook (script): {e}"] for e in EVENTS[:2]) / base
    lean = max(med[f"lean door: {e}"] for e in EVENTS[:2]) / base
    mem = [med[f"memd hook (script): {e}"] / base for e in EVENTS[2:]]
    plain_common = max(med[f"plain venv: {e}"] for e in EVENTS[:2]) / pbase
    plain_mem = [med[f"plain venv: {e}"] / pbase for e in EVENTS[2:]]
    met = "met" if max(common, *mem) <= 2 else "NOT met"
    section = f"""## Hooks

Command: `.venv/bin/python bench/bench_hook.py --runs {runs} --write-docs` (2-core shared machine; each
variant run {runs} times, interleaved round-robin with the baseline; medians; memd byte-compiled first, as
pip does on install). Baseline: `python -c pass` with the same venv interpreter in the same run
({base * 1000:.1f} ms). "Other file" is a Write outside every memory folder, what nearly every tool call
is; "memory file" is a Write into `projects/<x>/memory/` with a 120-entry MEMORY.md (config, secret
scan, index measure). "Lean door" calls `memd.hooks.entry.main` without importing `memd.cli` first.
"Plain venv" runs what pip's console script runs, with a fresh venv's interpreter and memd on
PYTHONPATH (no editable install), as a ratio to that venv's own `python -c pass` ({pbase * 1000:.1f} ms).

| event | `memd hook` (console script) | `python -m memd hook` | lean door | plain venv |
|---|---|---|---|---|
{chr(10).join(rows)}

- Target (at most 2x the bare interpreter) {met}: **{common:.2f}x** on the path every tool call takes
  ({lean:.2f}x with the lean door) and **{min(mem):.2f}-{max(mem):.2f}x** on memory writes.
- A memory write loads the config (its sections are `memd.record.Record` classes, ~1 ms) and either
  the secret scan (PreToolUse: a literal pre-test per rule; only rules whose literals occur are
  compiled, on first need), or the index and frontmatter parsers
  (PostToolUse, ~1.5 ms). Neither path imports dataclasses (with inspect, ast, dis), typing, pathlib,
  or tomllib when there is no config file; nor yaml, anthropic, structlog, sqlite3, watchdog
  (tests/test_hooks.py runs the hook under `-X importtime`, with and without site, to hold this).
  Before the config and core values stopped being frozen dataclasses, a memory write cost 2.5-2.7x.
- Plain venv: {plain_common:.2f}x for other files, {min(plain_mem):.2f}-{max(plain_mem):.2f}x for memory
  writes. The dev venv's baseline includes its editable install's finder, which imports pathlib and
  importlib.util at every start (~10 ms); a regular install does not pay that, so the same few ms of
  memd weigh more against its smaller bare start. Most of what remains there is `json` with `re` and
  `enum` (~7 ms: needed to read the event, and pip's console script imports `re` itself), so the
  floor there is about 1.95x before memd does anything.
"""
    text = DOC.read_text(encoding="utf-8") if DOC.exists() else "# Benchmarks\n"
    start = text.find("\n## Hooks\n")
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + 1)
        text = text[:start + 1] + section + (text[end:] if end >= 0 else "")
    DOC.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
