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
