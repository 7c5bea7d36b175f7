"""Tests do not depend on the caller's environment (tests/conftest.py isolates every test)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, caller_variables


def test_no_caller_variable_reaches_a_test() -> None:
    assert caller_variables(os.environ) == []
    assert "XDG_CONFIG_HOME" not in os.environ and "ANTHROPIC_API_KEY" not in os.environ
    assert Path(os.environ["HOME"]) != Path("/root") and Path(os.environ["HOME"]).is_dir()


def test_the_unit_test_passes_under_a_moved_config_home(tmp_path: Path) -> None:
    """The suite once failed for a user with XDG_CONFIG_HOME set (the unit's EnvironmentFile path)."""
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "x"), "NO_COLOR": "1", "ANTHROPIC_API_KEY": "sk-test-x"}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "tests/test_daemon_commands.py::test_systemd_unit_contents",
                        "tests/test_environment.py::test_no_caller_variable_reaches_a_test"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
