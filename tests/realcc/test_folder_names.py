"""Oracle: the projects/ folder Claude Code creates for a working folder equals memd.layout's name.

One CLI run per awkward cwd (unicode in both normal forms, emoji, spaces, dots, a path over 200
UTF-16 units, a git worktree, a subfolder of a repository, a symlinked cwd). Claude Code creates
``projects/<transcript folder>/<session>.jsonl`` (keyed on the start-up cwd, symlinks resolved) and
``projects/<memory folder>/memory/`` (keyed on the canonical git root); ``memd.layout.folder_for_cwd``
names the memory folder.
"""

from __future__ import annotations

import os
import tempfile
import unicodedata
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from memd import layout
from tests.realcc.cli import Sandbox, git, init_repo
from tests.realcc.stub import CliStub

NAMES = "issue 10 #2: folder names replace each UTF-16 unit (an emoji becomes '--') and are not normalised"


@dataclass
class Layout:
    cwd: Path  # the folder the CLI starts in (as the shell names it: PWD)
    memory: set[str]  # projects/ folders with a memory/ folder
    transcripts: set[str]  # projects/ folders holding the session's transcript


def _plain(base: Path, name: str) -> tuple[Path, Path]:
    p = base / name
    p.mkdir(parents=True)
    return p, p


def _repo_sub(base: Path) -> tuple[Path, Path]:
    repo = init_repo(base / "repo")
    (repo / "pkg" / "sub").mkdir(parents=True)
    return repo / "pkg" / "sub", repo / "pkg" / "sub"


def _worktree(base: Path) -> tuple[Path, Path]:
    repo = init_repo(base / "main")
    git(repo, "worktree", "add", "-q", "-b", "feature", str(base / "wt-feature"))
    return base / "wt-feature", base / "wt-feature"


def _symlinked(base: Path) -> tuple[Path, Path]:
    real = init_repo(base / "real" / "repo")
    link = base / "link"
    link.symlink_to(real.parent, target_is_directory=True)
    return link / "repo", real


CWDS: dict[str, tuple[Callable[[Path], tuple[Path, Path]], str | None]] = {
    "ascii": (lambda b: _plain(b, "project"), None),
    "spaces": (lambda b: _plain(b, "my project  two"), None),
    "dots-and-dashes": (lambda b: _plain(b, "v1.2.3..x-y_z"), None),
    "nfc-accent": (lambda b: _plain(b, unicodedata.normalize("NFC", "caf\u00e9")), None),
    "nfd-accent": (lambda b: _plain(b, unicodedata.normalize("NFD", "caf\u00e9")), None),
    "emoji": (lambda b: _plain(b, "app-\U0001F600"), None),
    "cjk": (lambda b: _plain(b, "\u8a18\u61b6"), None),
    "long-220": (lambda b: _plain(b, "a" * 220), None),
    "long-emoji": (lambda b: _plain(b, "\U0001F600" * 40 + "/" + "b" * 150), None),
    "git-subfolder": (_repo_sub, None),
    "git-worktree": (_worktree, None),
    "symlinked-cwd": (_symlinked, None),
}


def _run(binary: Path, stub: CliStub, cid: str) -> Layout:
    base = Path(tempfile.mkdtemp(prefix="rcn"))
    sb = Sandbox(binary, stub, base)
    make = CWDS[cid][0]
    cwd, _real = make(base / "w")
    prompt = f"folder case {cid}"
    run = sb.run(prompt, cwd=cwd, env={"PWD": str(cwd)})
    assert run.rc == 0, (cid, run.stderr[-2000:])
    dirs = [p for p in sb.projects.iterdir() if p.is_dir()]
    return Layout(cwd, {p.name for p in dirs if (p / "memory").is_dir()},
                  {p.name for p in dirs if any(p.glob("*.jsonl"))})


@pytest.fixture(scope="module")
def layouts(claude_cli: Path) -> Iterator[dict[str, Layout]]:
    with CliStub() as stub, ThreadPoolExecutor(3) as pool:
        futures = {cid: pool.submit(_run, claude_cli, stub, cid) for cid in CWDS}
        yield {cid: f.result() for cid, f in futures.items()}


def _same(ours: str, theirs: str) -> bool:
    """Equal, or both cut at 200 units with the same prefix (the hash after it differs by design)."""
    if len(theirs) > layout.MAX_FOLDER_NAME:
        return len(ours) > layout.MAX_FOLDER_NAME and ours[:layout.MAX_FOLDER_NAME] == theirs[:layout.MAX_FOLDER_NAME]
    return ours == theirs


def _params() -> list[object]:
    return [pytest.param(cid, id=cid, marks=[pytest.mark.xfail(strict=True, reason=r)] if r else [])
            for cid, (_, r) in CWDS.items()]


@pytest.mark.parametrize("cid", _params())
def test_memory_folder_name(layouts: dict[str, Layout], cid: str) -> None:
    got = layouts[cid]
    assert len(got.memory) == 1, got
    (theirs,) = got.memory
    ours = layout.folder_for_cwd(got.cwd)
    assert _same(ours, theirs), (ours, theirs)


def test_memory_folder_found_by_memd(layouts: dict[str, Layout], tmp_path: Path) -> None:
    """memd finds a long folder Claude Code made (a different hash) by its 200-unit prefix."""
    theirs = next(iter(layouts["long-220"].memory))
    (tmp_path / theirs).mkdir()
    ours = layout.folder_for_cwd(layouts["long-220"].cwd)
    assert layout.find_folder(tmp_path, ours) == tmp_path / theirs


def test_transcripts_follow_the_cwd_and_memory_the_git_root(layouts: dict[str, Layout]) -> None:
    """Pin Claude Code's own keying (facts 1): the transcript folder is the cwd's (symlinks resolved),
    the memory folder the git root's, shared by worktrees and subfolders."""
    sub, wt, link = layouts["git-subfolder"], layouts["git-worktree"], layouts["symlinked-cwd"]
    assert sub.transcripts == {layout.sanitize(os.path.realpath(sub.cwd))}
    assert sub.memory == {layout.sanitize(os.path.realpath(sub.cwd.parent.parent))}
    assert wt.transcripts == {layout.sanitize(os.path.realpath(wt.cwd))}
    assert wt.memory == {layout.sanitize(os.path.realpath(wt.cwd.parent / "main"))}
    assert link.transcripts == link.memory == {layout.sanitize(os.path.realpath(link.cwd))}
