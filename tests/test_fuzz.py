"""Fuzzing, the quick tier: hypothesis over the frontmatter, index, link and transcript parsers,
lint, the secret scanner, the memory tool's inputs and the hook's stdin (tests/fuzz_targets.py).
No exception escapes and no input takes longer than ``fuzz_targets.FLOOR`` seconds plus
``fuzz_targets.RATIO`` plain scans of its text. Derandomized, so every run draws the same inputs;
the long tier draws thousands more: ``python bench/fuzz.py --count 10000``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tests import fuzz_targets as ft

EXAMPLES = 40


@pytest.mark.parametrize("name", list(ft.FUNCS))
def test_no_exception_and_no_slow_input(name: str) -> None:
    @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(ft.strategy(name, max_repeat=300))
    def one(value: Any) -> None:
        ft.run(name, value)

    one()
