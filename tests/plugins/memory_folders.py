"""Fixtures for the memory-folder core and its commands (check, rebuild, status, config)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def topic(name: str, description: str, type_: str, body: str = "Body text.\n") -> str:
    return f"---\nname: {name}\ndescription: {description}\ntype: {type_}\n---\n\n{body}"


def write_tree(base: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        p = base / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_bytes(content.encode("utf-8"))
    return base


@pytest.fixture
def make_project(claude_home: Path) -> Callable[..., Path]:
    """make_project(name, {rel: text}) -> the memory folder of a new project under claude_home."""

    def make(name: str = "-home-u-proj", files: dict[str, str | bytes] | None = None,
             memory: bool = True) -> Path:
        proj = claude_home / "projects" / name
        proj.mkdir(parents=True, exist_ok=True)
        mem = proj / "memory"
        if memory:
            mem.mkdir(exist_ok=True)
            write_tree(mem, files or {})
        return mem

    return make


@pytest.fixture
def memd_cli(claude_home: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run the real memd in a subprocess against claude_home (isolated HOME and XDG folders)."""

    def run(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            claude: Path | None = None) -> subprocess.CompletedProcess[str]:
        e = dict(os.environ)
        e.update(env or {})
        cmd = [sys.executable, "-m", "memd", "--claude-dir", str(claude or claude_home), *args]
        return subprocess.run(cmd, cwd=cwd or ROOT, env=e, capture_output=True, text=True, timeout=60,
                              check=False)

    return run
