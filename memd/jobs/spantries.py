"""The catch-up's tries of a span, judged (a pure rule) and said by `memd status`.

A span whose run failed after a reply, was refused or stopped at a cap is tried again (``state.SpanTry``
counts the tries): the first ``EAGER_TRIES`` at the catch-up's own pace, later ones after
``catchup.retry_hours``, and at ``catchup.max_tries`` it is parked until a user's retry (docs/model-jobs.md,
"Bounded tries"). `memd status` said nothing until a span was parked, two days later; ``status_lines``
names every span waiting to be tried again, with its tries, its reason and when the next try comes.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

EAGER_TRIES = 3  # tries of a span at the catch-up's own pace; later ones wait ``catchup.retry_hours``


def span_state(tr: Any, now: float, cfg: Any) -> str:
    """A recorded try's hold on its span: "parked" (until a user's retry), "deferred" (tried
    ``EAGER_TRIES`` times: the next try waits ``catchup.retry_hours``) or "due" (tried again next run)."""
    if tr.parked is not None:
        return "parked"
    if tr.tries >= EAGER_TRIES and now - tr.last_try < cfg.catchup.retry_hours * 3600:
        return "deferred"
    return "due"


def waiting(state: Any, names: list[str], cfg: Any, now: float) -> dict[str, list[tuple[Any, str]]]:
    """Per project, its spans waiting to be tried again (not parked: the ``catchup_parked`` warning says
    those), each with its state ("deferred" or "due"); a try row for an offset the catch-up has moved past
    is stale and left out."""
    out: dict[str, list[tuple[Any, str]]] = {}
    for name in names:
        for path, tr in sorted(state.span_tries(name).items()):
            t = state.transcript(path)
            if tr.parked is not None or t is None or t.extract_offset != tr.start:
                continue
            out.setdefault(name, []).append((tr, span_state(tr, now, cfg)))
    return out


def status_lines(state_dir: Path, names: list[str], cfg: Any, now: float | None = None) -> str:
    """`memd status`'s lines about spans waiting to be retried; "" when there are none (or no state)."""
    from memd.core.secrets import redact
    from memd.state import FILENAME, StateStore

    if not (state_dir / FILENAME).exists():  # status never creates memd's state
        return ""
    now = time.time() if now is None else now
    with StateStore.open(state_dir) as st:
        found = waiting(st, names, cfg, now)
    lines: list[str] = []
    for name, rows in found.items():
        tries = max(tr.tries for tr, _ in rows)
        newest = max(rows, key=lambda r: r[0].last_try)[0]
        deferred = [tr for tr, s in rows if s == "deferred"]
        if deferred:
            at = min(tr.last_try for tr in deferred) + cfg.catchup.retry_hours * 3600
            nxt = "the next try after " + time.strftime("%Y-%m-%d %H:%M", time.localtime(at))
        else:
            nxt = "tried again at the next catch-up"
        lines.append(f"catch-up: {name}: {len(rows)} span(s) waiting to be retried (tried {tries} of "
                     f"{cfg.catchup.max_tries} times; last: {redact(newest.reason[:160]) or 'no reason kept'}); "
                     f"{nxt}; parked after {cfg.catchup.max_tries} tries")
    return "".join(line + "\n" for line in lines)
