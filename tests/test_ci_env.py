"""README's two opening commands hold together: the second (`bash .ci/run`) must not reinstall into the
`.venv` the first made, whose regular install the hooks installed from it start (`hooks/start.py`)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_check_uses_its_own_environment() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^VENV=\$\{MEMD_CI_VENV:-\.venv-ci\}$", script, re.M)
    assert not re.search(r"(^|[\s\"'])\.venv/", script), "the check must not touch README's .venv"
    readme = (ROOT / "README.md").read_text()
    first, second = readme.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()[:2]
    assert first.startswith("python3 -m venv .venv && .venv/bin/pip install -q . && .venv/bin/memd run")
    assert second.startswith("bash .ci/run")


def test_the_readme_says_what_the_check_fetches_and_installs() -> None:
    """Issue 34: README said `.ci/run` runs ruff, mypy and the tests, and not that it fetches Claude Code
    from npm and apt-installs Chromium (outside the repository, as root). Each thing the script installs
    beyond pip is named in the README, with where it goes."""
    script = (ROOT / ".ci" / "run").read_text()
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "apt-get install" in script and "chromium-driver" in script  # what the script does
    assert "tests.realcc.cli" in script and "MEMD_REALCC_VERSION=2.1.328" in script
    cli = (ROOT / "tests" / "realcc" / "cli.py").read_text()
    assert "npm install --prefix" in cli and '"2.1.332"' in cli
    for claim in ("from npm", "@anthropic-ai/claude-code", "~/.cache/memd-tests/claude-code/", "2.1.332", "2.1.328",
                  "`chromium` and `chromium-driver`", "apt-get install", "as root", "exits non-zero"):
        assert claim in readme, claim
