"""The real-client tier: every test here runs the pinned Claude Code CLI (marker ``realcc``).

``claude_cli`` installs it once per version into a cache outside the repository (see
``tests/realcc/cli.py``) or skips the tier with the reason; ``sandbox`` is an isolated HOME, a git
repository and a fresh Messages API stand-in for one test. Run only this tier with
``pytest -m realcc``; leave it out with ``-m "not realcc"``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.realcc.cli import VERSION, Sandbox, ensure_cli
from tests.realcc.stub import CliStub

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.realcc)


@pytest.fixture(scope="session")
def claude_cli() -> Path:
    """The native binary of the pinned Claude Code (installed on first use), or a skip."""
    binary, why = ensure_cli(VERSION)
    if binary is None:
        pytest.skip(f"real-client tier skipped: {why}")
    return binary


@pytest.fixture
def sandbox(claude_cli: Path) -> Iterator[Sandbox]:
    """An isolated HOME + git repository, talking to a fresh Messages API stand-in."""
    # A short base folder: Claude Code's folder names (and the 200-unit cut) depend on the path.
    base = Path(tempfile.mkdtemp(prefix="rcc"))
    stub = CliStub()
    try:
        yield Sandbox(claude_cli, stub, base)
    finally:
        stub.close()
        import shutil

        shutil.rmtree(base, ignore_errors=True)
