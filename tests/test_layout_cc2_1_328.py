"""Folder names and memory settings as Claude Code 2.1.328 has them (facts.md section 1)."""

from __future__ import annotations

import json
import os
import unicodedata
from pathlib import Path

import pytest

from memd import ccsettings, layout
from memd.transcripts.sessions import memory_project_for


@pytest.fixture(autouse=True)
def no_machine_policy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The machine's own managed settings must not leak into these tests."""
    monkeypatch.setattr(ccsettings, "managed_settings_path", lambda: str(tmp_path / "managed-settings.json"))
    for var in ("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "CLAUDE_CODE_PROJECT_DIR_NAME"):
        monkeypatch.delenv(var, raising=False)


# --------------------------------------------------------------------------- folder names

@pytest.mark.parametrize(("path", "name"), [
    ("/tmp/🎉party", "-tmp---party"),  # one emoji, two UTF-16 units, two dashes
    ("/tmp/" + unicodedata.normalize("NFD", "café"), "-tmp-cafe-"),  # e + combining accent: "e-"
    ("/tmp/" + unicodedata.normalize("NFC", "café"), "-tmp-caf-"),
    ("/tmp/中文 dir.v2", "-tmp----dir-v2"),
    ("/tmp/a\U0001F600b\u00e9", "-tmp-a--b-"),
])
def test_every_utf16_unit_becomes_a_dash_without_normalising(path: str, name: str) -> None:
    assert layout.sanitize(path) == name


def test_long_name_counts_utf16_units_and_is_matched_by_its_prefix(tmp_path: Path) -> None:
    path = "/" + "😀" * 120  # 240 UTF-16 units: cut at 200
    name = layout.sanitize(path)
    assert name.startswith("-" * 200 + "-") and len(name) > 201
    made = tmp_path / (name[:200] + "-cli0hash")
    made.mkdir()
    assert layout.find_folder(tmp_path, name) == made


def test_folder_for_cwd_keeps_the_path_as_given(tmp_path: Path) -> None:
    nfd = tmp_path / unicodedata.normalize("NFD", "projé")
    try:
        nfd.mkdir()
    except OSError:
        pytest.skip("the file system refuses decomposed names")
    real = next(p for p in tmp_path.iterdir())  # the name as the file system keeps it
    assert layout.folder_for_cwd(real) == layout.sanitize(os.fspath(real.resolve()))


def test_session_start_and_scan_find_an_emoji_project(claude_home: Path, tmp_path: Path) -> None:
    work = tmp_path / "fête 🎉"
    work.mkdir()
    name = layout.sanitize(os.fspath(work.resolve()))
    (claude_home / "projects" / name / "memory").mkdir(parents=True)
    assert layout.resolve_project(os.fspath(work), claude_home).name == name
    assert memory_project_for(os.fspath(work), "-elsewhere", claude_home / "projects") == name


def test_project_dir_name_needs_the_config_dir_and_a_plain_name(claude_home: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_CODE_PROJECT_DIR_NAME", "shared-mem")
    assert layout.folder_for_cwd(tmp_path) != "shared-mem"  # without CLAUDE_CONFIG_DIR it is ignored
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", os.fspath(claude_home))
    assert layout.folder_for_cwd(tmp_path) == "shared-mem"
    (claude_home / "projects" / "shared-mem").mkdir()
    assert layout.resolve_project(os.fspath(tmp_path), claude_home).name == "shared-mem"
    for bad in ("a/b", "x" * 65, "CON", "has space"):
        monkeypatch.setenv("CLAUDE_CODE_PROJECT_DIR_NAME", bad)
        assert layout.folder_for_cwd(tmp_path) == layout.sanitize(os.fspath(tmp_path.resolve()))


# --------------------------------------------------------------------------- settings

@pytest.mark.parametrize(("value", "off"), [
    ("1", True), ("true", True), ("YES", True), ("On", True), (" on ", True),
    ("0", False), ("false", False), ("off", False), ("", None), ("maybe", None),
])
def test_disable_env_any_case_and_zero_forces_on(claude_home: Path, monkeypatch: pytest.MonkeyPatch,
                                                 value: str, off: bool | None) -> None:
    (claude_home / "settings.json").write_text(json.dumps({"autoMemoryEnabled": False}))
    monkeypatch.setenv("CLAUDE_CODE_DISABLE_AUTO_MEMORY", value)
    why = layout.memory_disabled(claude_home)
    if off is None:  # the env says nothing: the setting decides
        assert why is not None and "autoMemoryEnabled" in why
    else:
        assert (why is not None) == off


def _write(path: Path, data: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def test_project_and_local_scopes_are_read_with_precedence(claude_home: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    _write(claude_home / "settings.json", {"autoMemoryEnabled": True, "autoMemoryDirectory": str(tmp_path / "u")})
    assert layout.memory_disabled(claude_home, layout.read_settings(claude_home, repo)) is None
    _write(repo / ".claude" / "settings.json",
           {"autoMemoryEnabled": False, "autoMemoryDirectory": str(tmp_path / "p")})
    s = layout.read_settings(claude_home, repo)
    assert "settings.json" in (layout.memory_disabled(claude_home, s) or "")
    assert os.fspath(repo) in (layout.memory_disabled(claude_home, s) or "")
    assert layout.memory_override(claude_home, s) == tmp_path / "p"
    _write(repo / ".claude" / "settings.local.json",
           {"autoMemoryEnabled": True, "autoMemoryDirectory": str(tmp_path / "l")})
    s = layout.read_settings(claude_home, repo)
    assert layout.memory_disabled(claude_home, s) is None
    assert layout.memory_override(claude_home, s) == tmp_path / "l"
    _write(Path(ccsettings.managed_settings_path()), {"autoMemoryEnabled": False})
    why = layout.memory_disabled(claude_home, layout.read_settings(claude_home, repo))
    assert "managed-settings.json" in (why or "")
    # without a repo only the user's (and the managed) settings count
    assert layout.memory_override(claude_home) == tmp_path / "u"


def test_resolve_project_of_a_working_folder_honours_its_settings(claude_home: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _write(repo / ".claude" / "settings.local.json", {"autoMemoryDirectory": str(tmp_path / "mine")})
    assert layout.resolve_project(os.fspath(repo), claude_home).memory_dir == tmp_path / "mine"


@pytest.mark.parametrize("value", ["~/", "~", "/", "~/..", "~/../x", "relative/mem", "./mem", "HOME", "HOME_PARENT",
                                   "", "  ", "/a\x00b"])
def test_rejected_memory_directories_fall_back_to_the_default(claude_home: Path, value: str) -> None:
    home = Path(os.environ["HOME"])
    value = {"HOME": os.fspath(home), "HOME_PARENT": os.fspath(home.parent)}.get(value, value)
    _write(claude_home / "settings.json", {"autoMemoryDirectory": value})
    assert layout.memory_override(claude_home) is None
    (claude_home / "projects" / "-p").mkdir(exist_ok=True)
    assert layout.list_projects(claude_home)[0].memory_dir == claude_home / "projects" / "-p" / "memory"
    from memd.ccsettings import user_memory_override as memory_override  # the secret guard's reading agrees

    assert memory_override(os.fspath(claude_home)) is None


@pytest.mark.parametrize(("value", "expected"), [
    ("~/mem", "HOME/mem"), ("~/a/../mem", "HOME/mem"), ("/abs/mem/", "/abs/mem"), ("/abs//mem/.", "/abs/mem"),
])
def test_accepted_memory_directories(claude_home: Path, value: str, expected: str) -> None:
    home = os.environ["HOME"]
    _write(claude_home / "settings.json", {"autoMemoryDirectory": value})
    want = Path(expected.replace("HOME", home))
    assert layout.memory_override(claude_home) == want
    from memd.ccsettings import user_memory_override as memory_override

    assert memory_override(os.fspath(claude_home)) == os.fspath(want)


def test_guard_does_not_take_a_repository_for_memory_under_tilde(claude_home: Path, tmp_path: Path) -> None:
    from memd.hooks.context import HookContext

    _write(claude_home / "settings.json", {"autoMemoryDirectory": "~/"})
    repo = Path(os.environ["HOME"]) / "repo"
    hc = HookContext(claude_dir=os.fspath(claude_home))
    assert hc.memory_folder(os.fspath(repo / ".env")) is None


from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@given(st.text(max_size=100))  # at most 200 units: no cut
def test_folder_name_is_one_dash_per_utf16_unit(path: str) -> None:
    name = layout.sanitize(path)
    assert len(name) == len(path.encode("utf-16-le", "surrogatepass")) // 2
    if all(ord(c) <= 0xFFFF for c in path):  # then unit i is character i
        assert all(a == b for a, b in zip(name, path, strict=True) if b.isascii() and b.isalnum())
    assert set(name) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")
