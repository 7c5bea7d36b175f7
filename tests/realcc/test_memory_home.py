"""Oracle (issue 21 #1): which ``projects/<folder>/memory/`` a session reads and writes when it starts in
a linked git worktree, in a monorepo subfolder, or in a second clone of the same repository.

Each memory folder Claude Code might pick is pre-seeded with a MEMORY.md carrying its own mark; the
CLI's first request shows which one it loaded (the block's header names the folder, the text its mark)
and which folder the ``# Memory`` instructions of its system prompt name. A scripted memory Write from a
worktree session shows where a memory lands. memd's sync decides identity per memory folder on this
rule (``memd.sync.identity``; docs/sync.md "Which folders are the same project").
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.realcc.cli import Sandbox, cc_name, git, memory_block
from tests.realcc.stub import tool_results


def _seed(sb: Sandbox, folder: Path, mark: str) -> Path:
    mem = sb.projects / cc_name(folder) / "memory"
    mem.mkdir(parents=True, exist_ok=True)
    (mem / "MEMORY.md").write_text(f"- [Note](note.md) — {mark}\n", encoding="utf-8")
    return mem


def _first_request(sb: Sandbox, prompt: str, cwd: Path) -> dict[str, object]:
    run = sb.run(prompt, cwd=cwd, env={"PWD": str(cwd)})
    assert run.rc == 0, run.stderr[-2000:]
    first = sb.main_requests(prompt)[0].body
    assert isinstance(first, dict)
    return first


def _layout(sb: Sandbox) -> dict[str, Path]:
    repo = sb.repo
    wt = sb.base / "wt-feature"
    git(repo, "worktree", "add", "-q", "-b", "feature", str(wt))
    sub = repo / "packages" / "api"
    sub.mkdir(parents=True)
    clone = sb.base / "second-clone"
    git(sb.base, "clone", "-q", str(repo), str(clone))
    return {"repo": repo, "wt": wt, "sub": sub, "clone": clone}


def test_worktree_and_subfolder_sessions_use_the_main_checkouts_memory(sandbox: Sandbox) -> None:
    """Pin: a session in a linked worktree or a subfolder loads the main checkout's memory folder (not
    one named after its own cwd, even when such a folder exists), and its system prompt names it."""
    where = _layout(sandbox)
    main = _seed(sandbox, where["repo"], "MARK-MAIN")
    decoy_wt = _seed(sandbox, where["wt"], "MARK-WORKTREE-FOLDER")
    decoy_sub = _seed(sandbox, where["sub"], "MARK-SUBFOLDER-FOLDER")
    for key, decoy in (("wt", decoy_wt), ("sub", decoy_sub)):
        prompt = f"memory home from {key}"
        body = _first_request(sandbox, prompt, where[key])
        assert memory_block(body, main) == "- [Note](note.md) — MARK-MAIN", key
        assert memory_block(body, decoy) is None, key
        system = json.dumps(body.get("system"), ensure_ascii=False)
        assert str(main) in system and str(decoy) not in system, key
        # the session's transcript is kept under its own cwd's folder all the same
        assert list((sandbox.projects / cc_name(where[key])).glob("*.jsonl")), key


def test_a_second_clone_has_a_memory_folder_of_its_own(sandbox: Sandbox) -> None:
    """Pin: a second clone of the same repository (same origin) is another canonical git root: its
    sessions load its own memory folder, never the first clone's."""
    where = _layout(sandbox)
    main = _seed(sandbox, where["repo"], "MARK-MAIN")
    own = _seed(sandbox, where["clone"], "MARK-CLONE")
    body = _first_request(sandbox, "memory home from a clone", where["clone"])
    assert memory_block(body, own) == "- [Note](note.md) — MARK-CLONE"
    assert memory_block(body, main) is None
    assert "MARK-MAIN" not in json.dumps(body, ensure_ascii=False)


@pytest.mark.parametrize("key", ["wt", "sub"])
def test_a_worktree_sessions_memory_write_lands_in_the_main_checkouts_folder(sandbox: Sandbox, key: str) -> None:
    """Pin: the folder the system prompt names is where a worktree's (a subfolder's) session's memory
    goes: a Write there is allowed without asking and lands in ``projects/<main checkout>/memory/``;
    Claude Code makes no memory folder under the session's own (transcript) folder."""
    where = _layout(sandbox)
    main = sandbox.projects / cc_name(where["repo"]) / "memory"
    target = main / "feature_branch.md"
    st = sandbox.stub
    st.turns(st.message(st.tool_use("Write", {"file_path": str(target),
                                              "content": "---\nname: feature\ndescription: d\ntype: project\n---\n"
                                                         "written from the worktree\n"})),
             st.message(st.text("done.")))
    prompt = f"write a memory from {key}"
    run = sandbox.run(prompt, cwd=where[key], env={"PWD": str(where[key])})
    assert run.rc == 0, run.stderr[-2000:]
    results = [r for req in sandbox.main_requests(prompt)[1:] for r in tool_results(req.body)]
    assert results and not any(r.get("is_error") for r in results), results
    assert "written from the worktree" in target.read_text(encoding="utf-8")
    own = sandbox.projects / cc_name(where[key])
    assert list(own.glob("*.jsonl")) and not (own / "memory").exists()
