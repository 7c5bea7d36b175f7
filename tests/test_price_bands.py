"""Haiku 5.5's prompt-length band (issue 24, "prices you can trust"): a request whose prompt (input,
cache writes and cache reads) passes 100,000 tokens is billed at five times every rate, output included;
memd costed it at the lower band."""

from __future__ import annotations

import pytest

from memd.config import Config
from memd.llm import client as llm


def _cost(model: str, usage: dict[str, int]) -> float:
    u = llm.Usage()
    u.add(Config(), model, usage)
    return u.cost_usd


def test_a_prompt_past_100k_tokens_on_haiku_5_5_costs_five_times() -> None:
    small = {"input_tokens": 1_000, "output_tokens": 500, "cache_creation_input_tokens": 40_000,
             "cache_read_input_tokens": 59_000}  # 100,000: the lower band
    big = dict(small, cache_read_input_tokens=59_001)
    p = Config().model.prices["claude-haiku-5-5"]
    low = (1_000 * p["input"] + 500 * p["output"] + 40_000 * p["cache_write"] + 59_000 * p["cache_read"]) / 1e6
    assert _cost("claude-haiku-5-5", small) == pytest.approx(low)
    high = (1_000 * p["input"] + 500 * p["output"] + 40_000 * p["cache_write"] + 59_001 * p["cache_read"]) / 1e6
    assert _cost("claude-haiku-5-5", big) == pytest.approx(5 * high)
    assert _cost("claude-haiku-5-5-20261007", big) == pytest.approx(5 * high)  # a dated id
    # other models have no band
    s = Config().model.prices["claude-sonnet-5-5"]
    assert _cost("claude-sonnet-5-5", big) == pytest.approx(
        (1_000 * s["input"] + 500 * s["output"] + 40_000 * s["cache_write"] + 59_001 * s["cache_read"]) / 1e6)
