"""Golden cases of the guard (``memd.core.guard``): a folder before, a folder after, the verdict.

- guard/<case>/before/ and after/: the memory folder as staged and as the run left it
- guard/<case>/case.json (optional): ``limits`` (GuardLimits overrides), what only the live
  folder tells, ``live_problems`` (path -> why) and ``live_exists`` (non-markdown paths), and a model
  run's declared forgetting, ``forgotten`` (``[{file, reason, into?, stale?: [{text, reason}]}]``,
  ``memd.core.declared``; absent: a writer that declares nothing, judged by the old rules)
- guard/<case>/expected.txt: the verdict on the first line, then one reason per line

The pure rules are checked on every case; cases without live facts also go through the I/O shell
(``memd.apply``: stage a real folder, let the "model" write the after/ files, guard) to show that
it hands the rules the same folders. ``MEMD_UPDATE_GOLDEN=1`` rewrites expected.txt.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from memd import apply as ap
from memd.config import BudgetConfig, Config, DreamConfig, replace
from memd.core import guard
from memd.core.declared import Forgotten, Stale
from memd.layout import Project
from tests.test_golden import cases, compare


def files(folder: Path) -> dict[str, bytes]:
    if not folder.is_dir():
        return {}
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def meta(case: Path) -> dict[str, Any]:
    p = case / "case.json"
    return json.loads(p.read_text()) if p.exists() else {}


def forgotten(m: dict[str, Any]) -> list[Forgotten] | None:
    if "forgotten" not in m:
        return None
    return [Forgotten(f["file"], f["reason"], f.get("into", ""),
                      tuple(Stale(s["text"], s["reason"]) for s in f.get("stale", ())))
            for f in m["forgotten"]]


def expected_text(res: guard.GuardResult) -> str:
    return "\n".join((res.verdict, *res.reasons)) + "\n"


@pytest.mark.parametrize("case", cases("guard"), ids=lambda p: p.name)
def test_guard(case: Path) -> None:
    m = meta(case)
    limits = replace(guard.GuardLimits(), **m.get("limits", {}))
    res = guard.check(files(case / "before"), files(case / "after"), limits,
                      live_problems=m.get("live_problems", {}), live_exists=m.get("live_exists", ()),
                      forgotten=forgotten(m))
    assert res.passed == (res.reasons == ())
    compare(case / "expected.txt", expected_text(res))


@pytest.mark.parametrize("case", [c for c in cases("guard") if not ({"live_problems", "live_exists"} & set(meta(c)))],
                         ids=lambda p: p.name)
def test_apply_shell_agrees(case: Path, tmp_path: Path) -> None:
    declared = forgotten(meta(case))
    m = meta(case).get("limits", {})
    cfg = Config()
    cfg = replace(cfg, budget=replace(BudgetConfig(), **{k: v for k, v in m.items()
                                                        if k in ("max_lines", "max_chars", "warn_ratio")}),
                  dream=replace(DreamConfig(), **{k: v for k, v in m.items()
                                                  if k in ("max_delete_share", "max_shrink_share")}))
    d = tmp_path / "projects" / "-p"
    shutil.copytree(case / "before", d / "memory") if (case / "before").is_dir() else (d / "memory").mkdir(parents=True)
    with ap.stage(tmp_path / "state", Project("-p", d, d / "memory"), "dream", "r1") as st:
        shutil.rmtree(st.root)
        shutil.copytree(case / "after", st.root) if (case / "after").is_dir() else st.root.mkdir()
        reasons = ap.guard(st, ap.changes(st), cfg, forgotten=declared)
    lines = (case / "expected.txt").read_text().splitlines()
    assert reasons == lines[1:]
    assert not (tmp_path / "state" / "staging" / "-p" / "r1").exists()  # the context manager cleaned up


def test_bytes_that_are_not_utf8_are_rejected() -> None:
    res = guard.check({}, {"user_x.md": b"---\nname: x\n---\n\xff\xfe\n"}, guard.GuardLimits())
    assert res.verdict == "reject" and res.reasons == ("user_x.md: not valid UTF-8",)
