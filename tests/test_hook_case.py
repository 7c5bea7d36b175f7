"""Issue 22: on a case-insensitive file system (macOS's default) ``…/MEMORY/x.md`` and ``…/Memory/x.md``
are the memory folder: the hook's path test matches paths the way the file system does."""

from __future__ import annotations

from pathlib import Path

import pytest

from memd.hooks import context
from memd.hooks.context import HookContext


@pytest.mark.parametrize("insensitive", [True, False])
def test_the_path_test_follows_the_file_systems_case_rule(claude_home: Path, monkeypatch: pytest.MonkeyPatch,
                                                          insensitive: bool) -> None:
    mem = claude_home / "projects" / "-home-me-app" / "memory"
    mem.mkdir(parents=True)
    monkeypatch.setattr(context, "_INSENSITIVE", {})
    monkeypatch.setattr(context, "case_insensitive", lambda folder: insensitive)
    hc = HookContext(claude_dir=str(claude_home))
    exact = hc.memory_folder(str(mem / "x.md"))
    assert exact is not None and exact.rel == "x.md"
    for variant in ("MEMORY", "Memory"):
        path = str(claude_home / "projects" / "-home-me-app" / variant / "x.md")
        assert hc.may_be_memory(path)
        got = hc.memory_folder(path)
        if insensitive:
            assert got is not None and got.rel == "x.md" and got.memory_dir.endswith(variant), got
        else:
            assert got is None  # on Linux that is another folder, which Claude Code does not read
    other = str(claude_home.parent / "PROJECTS" / "x.md")
    assert hc.memory_folder(other) is None


def test_case_insensitivity_is_read_off_the_file_system(tmp_path: Path) -> None:
    """Here (Linux, case-sensitive) the flipped name is another folder."""
    folder = tmp_path / "Memory"
    folder.mkdir()
    assert context.case_insensitive(str(folder)) is False
    (tmp_path / "mEMORY").mkdir()
    assert context.case_insensitive(str(tmp_path / "mEMORY")) is False
