"""The long tier of the fuzzing and linear-time campaigns (the quick tiers: tests/test_fuzz.py and
tests/test_regex_linear.py).

Fuzzing: ``--count`` inputs drawn by hypothesis (split evenly over the targets of
tests/fuzz_targets.py: frontmatter, index, lint, secrets, transcript, memtool, hook), each under its
deadline (``FLOOR`` seconds plus ``RATIO`` plain scans of its text); no exception may escape.

Linear-time patterns (``--regex``): every pattern of tests/regex_audit.py fed every pathological
shape ``regex_audit.pathological`` builds for it, ``--size`` characters each, against the same
deadline as the CI tier (``regex_audit.RATIO`` plain scans).

    .venv/bin/python bench/fuzz.py --count 10500 [--seed 12] [--targets hook,secrets]
    .venv/bin/python bench/fuzz.py --regex [--size 262144]

Prints inputs, time, the slowest input per target and failures (the first failure of a target is
shrunk by hypothesis and printed); exits 1 if anything failed.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import HealthCheck, given, seed, settings

from tests import fuzz_targets as ft
from tests import regex_audit as ra


def fuzz(count: int, seed_value: int, targets: list[str]) -> int:
    per = max(1, count // len(targets))
    failed = 0
    total_inputs, t_all = 0, time.perf_counter()
    print(f"fuzzing: {per} inputs for each of {len(targets)} targets, seed {seed_value}")
    for name in targets:
        seen, slowest = [0], [0.0, 0.0]
        one = _campaign(name, per, seed_value, seen, slowest)
        t0 = time.perf_counter()
        try:
            one()
            status = "ok"
        except Exception:  # a failure: hypothesis has shrunk it to the smallest input
            failed += 1
            status = "FAILED\n" + traceback.format_exc(limit=3)
        total_inputs += seen[0]
        print(f"  {name:12s} {seen[0]:6d} inputs  {time.perf_counter() - t0:7.1f} s  slowest {slowest[0]:.3f} s "
              f"({int(slowest[1])} chars)  {status}", flush=True)
    print(f"total: {total_inputs} inputs in {time.perf_counter() - t_all:.0f} s, {failed} targets failed")
    return failed


def _campaign(name: str, per: int, seed_value: int, seen: list[int], slowest: list[float]) -> Any:
    @seed(seed_value)
    @settings(max_examples=per, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(ft.strategy(name))
    def one(value: Any) -> None:
        seen[0] += 1
        took = ft.run(name, value)
        if took > slowest[0]:
            slowest[:] = [took, float(len(ft._text_of(value)))]

    return one


def regex_sweep(size: int) -> int:
    failed = runs = 0
    worst: list[tuple[float, str, str]] = []
    t0 = time.perf_counter()
    sites = ra.discover()
    for site in sites:
        for pattern, flags in ra.patterns(site):
            rx = re.compile(pattern, flags)
            for label, text in ra.pathological(pattern, size):
                base, took = ra.check(rx, text, site.mode)
                runs += 1
                if took is None:
                    failed += 1
                    print(f"  SLOW {site.key} {str(pattern)[:60]!r} on {label}", flush=True)
                else:
                    worst.append((took / base, site.key, label))
    worst.sort(reverse=True)
    print(f"regex sweep: {len(sites)} call sites, {runs} runs of {size} characters in "
          f"{time.perf_counter() - t0:.0f} s, {failed} past {ra.RATIO}x a plain scan")
    for ratio, key, label in worst[:5]:
        print(f"  slowest: {ratio:6.0f}x  {key}  {label}")
    return failed


def main() -> int:
    import logging

    logging.disable(logging.WARNING)  # the transcript reader reports every bad line it skips
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=10_500, help="fuzzed inputs in all (default 10500)")
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--targets", default=",".join(ft.FUNCS), help="comma-separated targets")
    ap.add_argument("--regex", action="store_true", help="run the pattern sweep instead of fuzzing")
    ap.add_argument("--size", type=int, default=1 << 18, help="characters of each sweep input")
    args = ap.parse_args()
    if args.regex:
        return 1 if regex_sweep(args.size) else 0
    return 1 if fuzz(args.count, args.seed, [t for t in args.targets.split(",") if t]) else 0


if __name__ == "__main__":
    sys.exit(main())
