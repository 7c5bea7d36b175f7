"""Shared fixtures. Area-specific fixtures live in tests/plugins/*.py (loaded below)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_CLAUDE_DATA = ROOT.parent / "shared" / "claude-data"

pytest_plugins = [
    f"tests.plugins.{p.stem}"
    for p in sorted((Path(__file__).parent / "plugins").glob("*.py"))
    if p.stem != "__init__"
]

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# Variables of the caller's environment that change what memd does: where its folders are, which
# credentials and settings it sees, colour, journald, debugging. Every test starts without them and
# with a HOME of its own (no ~/.config/memd/config.toml, ~/.claude or state of the user's leaks in).
_CALLER_PREFIXES = ("XDG_", "ANTHROPIC_", "CLAUDE", "MEMD_", "AWS_", "GOOGLE_", "CLOUDSDK_", "VERTEX_")
_CALLER_NAMES = ("NO_COLOR", "FORCE_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "TERM", "COLUMNS", "JOURNAL_STREAM",
                 "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "INVOCATION_ID", "CLOUD_ML_REGION")
_KEPT = ("MEMD_REALCC_",)  # how to reach the pinned Claude Code CLI of the real-client tier


def caller_variables(environ: dict[str, str] | os._Environ[str]) -> list[str]:
    """The names in environ that a test must not inherit."""
    return [k for k in environ
            if (k.startswith(_CALLER_PREFIXES) or k in _CALLER_NAMES) and not k.startswith(_KEPT)]


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    for name in caller_variables(os.environ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path_factory.mktemp("home")))


def claude_data_source() -> Path | None:
    return SHARED_CLAUDE_DATA if SHARED_CLAUDE_DATA.is_dir() else None


@pytest.fixture
def claude_data(tmp_path: Path) -> Path:
    """A writable copy of ../shared/claude-data (skips when the folder is absent)."""
    src = claude_data_source()
    if src is None:
        pytest.skip("../shared/claude-data is not here (a user's clone)")
    dst = tmp_path / "claude"
    shutil.copytree(src, dst, symlinks=True)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    dst.chmod(0o755)
    return dst


@pytest.fixture
def claude_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Claude folder and isolated HOME/XDG folders for one test."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    claude = home / ".claude"
    (claude / "projects").mkdir(parents=True)
    return claude


assert importlib.util  # keep the import for plugins that probe optional modules
