"""Linear scanners on adversarial text (issue 22): time at 1 MB over time at 100 KB for check, status,
the PreToolUse hook and redaction, on the dense shapes of tests/test_scan_linear.py. The target is
at most 12 (linear: ~10; the quadratic line counting gave 70-200). Prints one JSON object.

    .venv/bin/python bench/bench_linear.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memd import inspect
from memd.config import Config, HooksConfig
from memd.core import secrets
from memd.hooks.context import HookContext
from memd.hooks.tool_use import pre_tool_use
from tests.test_scan_linear import DENSE, _best, _project


def _measure(make: Callable[[int], str], claude: Path, hc: HookContext, times: int) -> dict[str, list[float]]:
    texts = {n: make(n) for n in (100_000, 1_000_000)}
    projects = {n: _project(claude, t) for n, t in texts.items()}
    runs: dict[str, Callable[[int], object]] = {
        "check": lambda n: inspect.check_projects([projects[n]], Config()),
        "status": lambda n: inspect.status_rows([projects[n]], Config()),
        "hook": lambda n: pre_tool_use({"hook_event_name": "PreToolUse", "tool_name": "Write", "cwd": "/",
                                        "tool_input": {"file_path": str(projects[n].memory_dir / "b.md"),
                                                       "content": texts[n]}}, hc),
        "redaction": lambda n: secrets.redact(texts[n], marker="[REDACTED:{kind}]"),
    }
    out: dict[str, list[float]] = {}
    for what, run in runs.items():
        small = _best(lambda run=run: run(100_000), times)  # type: ignore[misc]
        big = _best(lambda run=run: run(1_000_000), max(2, times // 2))  # type: ignore[misc]
        out[what] = [round(small, 4), round(big, 3), round(big / small, 1)]
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp())
    os.environ["XDG_STATE_HOME"] = str(root / "state")
    claude = root / "claude"
    hc = HookContext(claude_dir=str(claude))
    hc._config = Config(hooks=HooksConfig(guard_max_chars=2_000_000))  # measure the scan, not the size limit
    out = {shape: _measure(make, claude, hc, args.runs) for shape, make in DENSE.items()}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
