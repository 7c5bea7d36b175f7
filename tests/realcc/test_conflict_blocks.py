"""Oracle: sync's conflict blocks (issue 21 #3) as the real Claude Code loads them.

The blocks are made by sync's own merge (``memd.sync.merge``): one in a topic file (right after its
frontmatter: a conflict about the description, and one in its body), and MEMORY.md with a block of
the shape memd's markers take. Observed on 2.1.328 and 2.1.332:

- MEMORY.md: the two marker lines are HTML comments, stripped when the index loads (they count no
  line, no character); the lines between load like any other line. The loaded text, cut and warning
  included, is memd's ``loaded_view`` (which ``memd check``'s budget measures), right at the line
  limit too: a block whose markers would push a file past 200 lines counts only its inner lines.
- A topic file: its frontmatter still parses (the recall side query lists it with its type and
  description); when recall picks it, the file is attached as it is, markers and all, so the model
  sees both sides and the marker's words ("keep what is right, then delete this block").
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from memd.core import conflict as cblock
from memd.core.budget import version_tuple
from memd.core.index import keeps_refdefs, loaded_view, measure
from memd.sync.merge import merge_file
from tests.realcc.battery import entries
from tests.realcc.cli import VERSION, Sandbox, memory_block
from tests.realcc.stub import CliStub, user_texts

RECALL_ENV = {"CLAUDE_CODE_GB_DISK_CACHE_WHEN_TELEMETRY_OFF": "1"}
START = cblock.begin_line("desktop", "2026-12-01")
BLOCK = f"Indent with tabs.\n{START}\nIndent with 4 spaces.\n{cblock.END}\n"


def _topic(desc: str, body: str) -> bytes:
    return f"---\nname: Database\ndescription: {desc}\ntype: project\n---\n{body}\n".encode()


def db_file() -> str:
    """A topic file after a sync met two true conflicts: the description and the body."""
    fm = merge_file("project_db.md", _topic("which database the app uses", "The database is SQLite."),
                    _topic("which database the app uses (MySQL)", "The database is MySQL now."),
                    _topic("which database the app uses (Postgres)", "The database is Postgres 16."),
                    machine="desktop", date="2026-12-01")
    assert fm.how == "conflict" and fm.result is not None
    return fm.result.decode()


INDEXES = {
    "small": "# Memory\n\n- [Database](project_db.md) — which database the app uses\n" + BLOCK,
    # 202 file lines, 200 loaded: the markers count nothing, so nothing is cut
    "at-limit": entries(198) + BLOCK,
    # 203 file lines, 201 loaded: cut after line 200, the warning counts loaded lines only
    "over-limit": entries(199) + BLOCK,
}


def _refdefs() -> bool:
    return keeps_refdefs(version_tuple(VERSION))


def _index_run(binary: Path, stub: CliStub, cid: str, base: Path) -> str | None:
    sb = Sandbox(binary, stub, base)
    (sb.memory / "MEMORY.md").write_text(INDEXES[cid], encoding="utf-8")
    prompt = f"conflict case {cid}"
    run = sb.run(prompt)
    assert run.rc == 0, (cid, run.stderr[-2000:])
    reqs = sb.main_requests(prompt)
    assert reqs, f"{cid}: the CLI sent no main request"
    return memory_block(reqs[0].body, sb.memory)


@pytest.fixture(scope="module")
def loaded(claude_cli: Path) -> Iterator[dict[str, str | None]]:
    bases = {cid: Path(tempfile.mkdtemp(prefix="rcb")) for cid in INDEXES}
    try:
        with CliStub() as stub:
            yield {cid: _index_run(claude_cli, stub, cid, bases[cid]) for cid in INDEXES}
    finally:
        for b in bases.values():
            shutil.rmtree(b, ignore_errors=True)


@pytest.mark.parametrize("cid", sorted(INDEXES))
def test_an_index_with_a_block_loads_as_memd_measures_it(loaded: dict[str, str | None], cid: str) -> None:
    text = INDEXES[cid]
    block = loaded[cid]
    assert block is not None
    view = loaded_view(text, refdefs=_refdefs())
    assert block == view.text  # the loaded text, cut and warning included
    assert cblock.BEGIN not in block and cblock.END not in block  # the markers are stripped
    m = measure(text, refdefs=_refdefs())
    shown = block.split("\n\n> WARNING: MEMORY.md is ")[0]
    if cid == "over-limit":
        assert m.level == "over" and m.lines == 201 and shown.count("\n") + 1 == 200
        assert "Indent with 4 spaces." not in shown and [e.line for e in m.hidden] == []
    else:
        # the block's lines load: the model sees both sides (the marker lines count nothing)
        assert shown.endswith("Indent with tabs.\nIndent with 4 spaces.")
        assert m.lines == shown.count("\n") + 1 and m.chars == len(shown.encode("utf-16-le")) // 2
        assert m.lines == (200 if cid == "at-limit" else 5) and not view.truncated


@pytest.fixture(scope="module")
def recalled(claude_cli: Path, request: pytest.FixtureRequest) -> Iterator[tuple[str, list[str]]]:
    """One session with recall on, whose side query picks the topic file holding blocks: the
    manifest line Claude Code made for it, and the texts of the main request after the pick."""
    base = Path(tempfile.mkdtemp(prefix="rcb"))
    with CliStub() as stub:
        request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
        sb = Sandbox(claude_cli, stub, base)
        (sb.memory / "MEMORY.md").write_text("- [Database](project_db.md) — which database\n", encoding="utf-8")
        (sb.memory / "project_db.md").write_text(db_file(), encoding="utf-8")
        (sb.home / ".claude.json").write_text(json.dumps({"cachedGrowthBookFeatures": {"tengu_moth_copse": True}}))
        stub.side_reply = lambda rec: '{"selected_memories": ["project_db.md"]}'
        stub.turns(stub.message(stub.tool_use("Bash", {"command": "sleep 2", "description": "wait"})))
        run = sb.run("which database do we use?", env=RECALL_ENV)
        assert run.rc == 0, run.stderr[-2000:]
        side = [r for r in stub.side if "Available memories:" in "\n".join(user_texts(r.body))]
        assert side, "no recall side query was sent"
        manifest = next(t for t in user_texts(side[0].body) if t.startswith("Available memories:"))
        line = next(ln for ln in manifest.split("\n") if "project_db.md" in ln)
        assert stub.main, "no main request"
        yield line, [json.dumps(r.body, ensure_ascii=False) for r in stub.main]


def test_the_topic_file_s_frontmatter_still_parses(recalled: tuple[str, list[str]]) -> None:
    """The block about the description sits after the frontmatter: Claude Code reads type and description."""
    line, _ = recalled
    assert line.startswith("- [project] project_db.md (") and line.endswith("): which database the app uses (MySQL)")


def test_the_topic_file_s_blocks_reach_the_model(recalled: tuple[str, list[str]]) -> None:
    _, bodies = recalled
    text = db_file()
    picked = [b for b in bodies if "The database is Postgres 16." in b]
    assert picked, "the picked memory never reached the model"
    # attached as the file is, markers included: both sides and the marker's words are visible
    assert json.dumps(text, ensure_ascii=False)[1:-1] in picked[-1]


def test_memd_reports_each_block(tmp_path: Path) -> None:
    """What the CLI loads above is what ``memd check`` calls unresolved (MEM090), per file and line."""
    from memd.core.files import FolderSnapshot
    from memd.core.lint import lint

    snap = FolderSnapshot.from_texts({"MEMORY.md": INDEXES["small"], "project_db.md": db_file()})
    found = sorted((f.path, f.line) for f in lint(snap) if f.code == "MEM090")
    assert found == [("MEMORY.md", 5), ("project_db.md", 6), ("project_db.md", 10)]
