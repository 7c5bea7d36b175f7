"""The distribution's name (issue 34, finding 7): PyPI's ``memd`` is another project (an agent memory
curator), so every install hint memd gives names a distribution of its own, or the clone (``'.[ui]'``),
and never ``memd[...]``. The commands stay ``memd`` and ``memd-hook``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import memd
from tests.plugins.memory_folders import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
# `pip install 'X[extra]'`, quoted or not, in prose, docs and messages
HINT = re.compile(r"pip install -?[-\w ]*?['\"]?([\w.\-]+)\[([\w,]+)\]")


def _texts() -> list[Path]:
    return [ROOT / "README.md", ROOT / "config.example.toml", *sorted((ROOT / "docs").glob("*.md")),
            *sorted((ROOT / "memd").rglob("*.py")), *sorted((ROOT / "memd").rglob("*.html"))]


def test_the_distribution_is_not_pypis_memd() -> None:
    name = PYPROJECT["project"]["name"]
    assert name == memd.DISTRIBUTION
    assert name.lower().replace("_", "-") != "memd"  # was "memd": `pip install memd` installs another project
    assert PYPROJECT["project"]["scripts"] == {"memd": "memd.__main__:main", "memd-hook": "memd.hooks.entry:run"}


def test_every_install_hint_names_the_clone_or_this_distribution() -> None:
    extras = set(PYPROJECT["project"]["optional-dependencies"])
    seen = 0
    bad: list[str] = []
    for path in _texts():
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for m in HINT.finditer(line):
                target, extra = m.groups()
                if target == "anthropic":  # the SDK's own extras (bedrock, vertex): its name, not ours
                    continue
                seen += 1
                if target not in (".", memd.DISTRIBUTION) or not set(extra.split(",")) <= extras:
                    bad.append(f"{path.relative_to(ROOT)}:{n}: {m.group(0)}")
    assert bad == []
    assert seen >= 4  # README, docs/ui.md (clone and index), the hint itself


def test_the_hint_memd_prints_works_from_the_index_and_from_a_clone() -> None:
    hint = memd.install_hint("ui")
    assert f"pip install '{memd.DISTRIBUTION}[ui]'" in hint and "pip install '.[ui]'" in hint


def test_memd_ui_without_jinja2_names_this_distribution(tmp_path: Path) -> None:
    shim = tmp_path / "nojinja"
    shim.mkdir()
    (shim / "jinja2.py").write_text("raise ImportError('no jinja2 here')\n")
    (tmp_path / "claude" / "projects").mkdir(parents=True)
    env = dict(os.environ, PYTHONPATH=f"{shim}{os.pathsep}{ROOT}", HOME=str(tmp_path),
               XDG_STATE_HOME=str(tmp_path / "state"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    p = subprocess.run([sys.executable, "-m", "memd", "--claude-dir", str(tmp_path / "claude"), "ui", "--here"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert p.returncode == 2, p.stderr
    assert "memd ui needs Jinja2" in p.stderr and f"'{memd.DISTRIBUTION}[ui]'" in p.stderr
    assert "'memd[ui]'" not in p.stderr


def test_the_installed_metadata_is_this_distributions() -> None:
    """The venv the tests run in was installed from this checkout (`pip install -e '.[test]'`)."""
    dist = metadata.distribution(memd.DISTRIBUTION)
    scripts = {e.name for e in dist.entry_points if e.group == "console_scripts"}
    assert {"memd", "memd-hook"} <= scripts
