"""Shared fixtures. Area-specific fixtures live in tests/plugins/*.py (loaded below)."""

from __future__ import annotations

import importlib.util
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
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    for name in ("ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX"):
        monkeypatch.delenv(name, raising=False)  # other credential sources (memd.llm.client.credential_source)
    claude = home / ".claude"
    (claude / "projects").mkdir(parents=True)
    return claude


assert importlib.util  # keep the import for plugins that probe optional modules
