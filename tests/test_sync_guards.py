

def test_a_folder_removed_and_made_anew_is_nothing_here_yet(machines: Any) -> None:
    """A reset whose folder Claude Code made again (and wrote into) before the next sync: the remote's
    memory comes back, the new memory goes out, nothing is deleted remotely (not even within the share)."""
    a, b = machines("ma"), machines("mb")
    shared(a, b)
    b.write("t1.md", topic("t1", "changed on b\n"))
    b.sync("app")
    shutil.rmtree(a.mem())
    a.write("fresh.md", topic("fresh", "written after the reset\n"))
    out = a.outcome("app")
    assert out.outcome == "changed", out
    assert len(a.topics()) == 9 and "changed on b" in (a.read("t1.md") or "")
    assert len([k for k in remote_files(b) if k != "MEMORY.md"]) == 9
