"""A regular (non-editable) install of memd built from this checkout, as users get it from pip.

The benchmarks measure memd where users run it: ``pip install .`` into a venv of its own, so the
interpreter starts without the editable install's finder (which imports pathlib and importlib.util
at every start of the development venv, the bare ``python -c pass`` included, and so halves every
ratio). With its dependencies, as a user's install has them: `memd check` reads lenient frontmatter
with PyYAML (a ``--no-deps`` install once made it fail fast, and the bench timed the failure).

``build(folder)`` creates ``folder`` (a venv with pip) if it is not one yet and (re)installs memd
from the checkout (or ``src``, another tree of it) into it, byte-compiled as pip does; it returns the venv's
``bin`` folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build(folder: Path, *, quiet: bool = True, src: Path = ROOT) -> Path:
    bindir = folder / ("Scripts" if os.name == "nt" else "bin")
    python = bindir / "python"
    base = getattr(sys, "_base_executable", sys.executable)
    if not python.exists():
        subprocess.run([base, "-m", "venv", str(folder)], check=True)
    q = ["-q"] if quiet else []
    # a venv built before the distribution was renamed holds this checkout as "memd": out first, so its
    # files and scripts are not the old distribution's too (PyPI's memd is another project)
    subprocess.run([str(python), "-m", "pip", "uninstall", "-y", "-q", "memd"], check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run([str(python), "-m", "pip", "install", *q, "--disable-pip-version-check",
                    "--force-reinstall", "--no-deps", str(src)], check=True,
                   stderr=subprocess.DEVNULL if quiet else None)
    # the dependencies once (a reinstall of memd alone keeps them): what `pip install .` gives a user
    subprocess.run([str(python), "-m", "pip", "install", *q, "--disable-pip-version-check", str(src)], check=True,
                   stderr=subprocess.DEVNULL if quiet else None)
    if not (bindir / "memd-hook").exists():
        raise SystemExit(f"the regular install in {folder} has no memd-hook script")
    return bindir
