"""The real Claude Code folders the start-up benchmarks measure beside their generated ones (issue 25).

``../shared/claude-data`` (next to the checkout) holds a real ``~/.claude/projects`` with two memory
folders: ``-home-dev-application-pipeline`` (54 topic files, a 116-line index of 14,669 characters)
and ``-home-dev-my-claude-stuff`` (14 topic files, 19 lines). ``copy_projects`` copies the whole tree
(transcripts included) into a temp Claude folder, optionally renaming project folders so that they
belong to a working folder that exists on this machine (the hooks find a project from the session's
working folder). ``grow_over_budget`` makes an index over its budget the way a user's grows: Claude
Code adds an index line per topic file it writes, ``- [name](file.md) — description``, here one for
each topic file the folder has (their own names and descriptions), under a heading at the end.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIG = "-home-dev-application-pipeline"
SMALL = "-home-dev-my-claude-stuff"


def source() -> Path | None:
    """The real data (``MEMD_CLAUDE_DATA`` or ``../shared/claude-data``), or None when absent."""
    p = Path(os.environ.get("MEMD_CLAUDE_DATA") or ROOT.parent / "shared" / "claude-data")
    return p if (p / "projects" / BIG / "memory" / "MEMORY.md").is_file() else None


def copy_projects(src: Path, claude: Path, rename: dict[str, str] | None = None) -> dict[str, Path]:
    """Copy src/projects/* into claude/projects (writable); the memory folder of every project that has one."""
    out: dict[str, Path] = {}
    for p in sorted((src / "projects").iterdir()):
        dst = claude / "projects" / (rename or {}).get(p.name, p.name)
        if p.is_dir():
            shutil.copytree(p, dst, symlinks=True)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, dst)
        for f in [dst, *dst.rglob("*")] if dst.is_dir() else [dst]:
            f.chmod(0o755 if f.is_dir() else 0o644)
        if (dst / "memory").is_dir():
            out[p.name] = dst / "memory"
    return out


def grow_over_budget(memory: Path) -> tuple[int, int]:
    """Append an index line per topic file (its frontmatter's name and description); (lines, characters)."""
    lines = []
    for f in sorted(memory.glob("*.md")):
        if f.name == "MEMORY.md":
            continue
        text = f.read_text(encoding="utf-8")
        name = re.search(r"^name:\s*(.*)$", text, re.M)
        desc = re.search(r"^description:\s*(.*)$", text, re.M)
        lines.append(f"- [{(name.group(1) if name else f.stem).strip()}]({f.name}) — "
                     f"{(desc.group(1) if desc else '').strip()}")
    index = memory / "MEMORY.md"
    text = index.read_text(encoding="utf-8").rstrip("\n") + "\n\n## Index (by file)\n" + "\n".join(lines) + "\n"
    index.write_text(text, encoding="utf-8")
    return text.count("\n"), len(text)
