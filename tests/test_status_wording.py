"""`memd status` names why an index cannot be measured in true words (issue 25).

An unreadable MEMORY.md (mode 000) was called "not a regular file"; a memory folder that cannot be
listed, whose MEMORY.md a session still loads, said "what a session reads of it is ok the budget".
The unit tests make the reads fail as a plain user's would (PermissionError, ``os.access`` false);
the last test runs memd as an unprivileged user (nobody) on real modes, and skips where it cannot.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from memd import cli

ROOT = Path(__file__).resolve().parent.parent
TOPIC = "---\nname: x\ndescription: d\ntype: user\n---\nbody\n"


def memd(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _project(claude: Path, name: str) -> Path:
    mem = claude / "projects" / name / "memory"
    mem.mkdir(parents=True)
    (mem / "MEMORY.md").write_text("- [X](x.md) — x\n")
    (mem / "x.md").write_text(TOPIC)
    return mem


def _warnings(out: str) -> dict[str, str]:
    return {w["project"]: w["text"] for w in json.loads(out)["warnings"]}


def test_an_index_that_cannot_be_opened_says_so(claude_home: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    mem = _project(claude_home, "-home-u-a")
    index = str(mem / "MEMORY.md")
    real_open = os.open

    def refusing(path: object, *a: object, **k: object) -> int:
        if os.fspath(path) == index:  # type: ignore[call-overload]
            raise PermissionError(13, "Permission denied", index)
        return real_open(path, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", refusing)
    code, out, err = memd(capsys, "status", "-home-u-a", "--format", "json")
    assert code == 1, err
    text = _warnings(out)["-home-u-a"]
    assert text == "-home-u-a: MEMORY.md cannot be read (Permission denied), so it cannot be measured"


def test_an_index_without_read_permission_is_not_called_irregular(claude_home: Path,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """What a plain user's mode-000 index looks like to memd's walk (root reads whatever the mode)."""
    mem = _project(claude_home, "-home-u-a")
    index = str(mem / "MEMORY.md")
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, m, *a, **k: False if os.fspath(p) == index
                        else real_access(p, m, *a, **k))
    code, out, _ = memd(capsys, "status", "-home-u-a")
    assert code == 1
    assert "-home-u-a: MEMORY.md cannot be read (permission denied), so it cannot be measured" in out
    assert "regular file" not in out


def test_a_folder_that_cannot_be_listed_says_what_a_session_loads(claude_home: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    mem = _project(claude_home, "-home-u-b")
    real_scandir = os.scandir

    def refusing(path: object = ".") -> object:
        if os.fspath(path) == str(mem):  # type: ignore[call-overload]
            raise PermissionError(13, "Permission denied", str(mem))
        return real_scandir(path)  # type: ignore[call-overload]

    monkeypatch.setattr(os, "scandir", refusing)
    code, out, _ = memd(capsys, "status", "-home-u-b")
    assert code == 1
    line = next(x for x in out.splitlines() if x.startswith("  -home-u-b:"))
    assert line == ("  -home-u-b: the memory folder cannot be read: cannot list (Permission denied); what a session"
                    " loads of MEMORY.md is within the budget (1/200 lines, 15/25,000 characters, 0% of what"
                    " Claude Code loads)")
    # an index near or over keeps its word
    (mem / "MEMORY.md").write_text("".join(f"- [E{i}](e{i}.md) — x\n" for i in range(250)))
    code, out, _ = memd(capsys, "status", "-home-u-b")
    assert "what a session loads of MEMORY.md is over the budget (250/200 lines" in out


def _python_for(uid: int) -> str | None:
    """An interpreter of this Python version that the user uid may run (this venv's may sit in /root)."""
    want = f"{sys.version_info[0]}.{sys.version_info[1]}"
    seen: list[str] = []
    for cand in (os.path.realpath(sys.executable), shutil.which(f"python{want}"), f"/usr/bin/python{want}",
                 f"/usr/local/bin/python{want}"):
        if not cand or cand in seen or not os.path.exists(cand):
            continue
        seen.append(cand)
        try:
            r = subprocess.run(_as(uid, [cand, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]),
                               capture_output=True, text=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if r.returncode == 0 and r.stdout.strip() == want:
            return cand
    return None


def _as(uid: int, argv: list[str]) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]


@pytest.fixture
def nobody_home() -> Iterator[tuple[int, Path]]:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("needs root to run memd as another user (a plain user gets the real modes in the tests above)")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    uid = 65534
    # /tmp, not the temp folder the run was given (TMPDIR may be a private folder uid 65534 cannot enter)
    top = Path(tempfile.mkdtemp(prefix="memd-nobody-", dir="/tmp" if os.path.isdir("/tmp") else None))
    try:
        top.chmod(0o755)
        yield uid, top
    finally:
        shutil.rmtree(top, ignore_errors=True)


_IMPORTED = """
import os, runpy, sys, sysconfig
sys.argv = ["memd", "status"]
try:
    runpy.run_module("memd", run_name="__main__")
except SystemExit:
    pass
pure = os.path.realpath(sysconfig.get_paths()["purelib"])
tops = set()
for mod in list(sys.modules.values()):
    f = getattr(mod, "__file__", None)
    if f and os.path.realpath(f).startswith(pure + os.sep):
        tops.add(os.path.relpath(os.path.realpath(f), pure).split(os.sep)[0])
sys.stderr.write("\\n".join(sorted(os.path.join(pure, t) for t in tops)) + "\\n")
"""


def _readable_copy_of_memd(lib: Path) -> Path:
    """memd's package and the third-party packages ``memd status`` imports (found by running it), copied
    into lib, readable by anyone."""
    scratch = lib.parent / "scratch"
    env = {**os.environ, "HOME": str(scratch), "XDG_STATE_HOME": str(scratch / "s"),
           "XDG_CONFIG_HOME": str(scratch / "c"), "PYTHONDONTWRITEBYTECODE": "1"}
    r = subprocess.run([sys.executable, "-c", _IMPORTED], capture_output=True, text=True, env=env, cwd=str(ROOT),
                       timeout=120, check=False)
    shutil.rmtree(scratch, ignore_errors=True)
    lib.mkdir(parents=True)
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "memd", lib / "memd", ignore=skip)
    for src in r.stderr.splitlines():
        name = os.path.basename(src)
        if not src.startswith("/") or name.startswith(("__editable__", "_distutils_hack")) or name == "memd":
            continue
        if os.path.isdir(src):
            shutil.copytree(src, lib / name, ignore=skip)
        elif os.path.isfile(src):
            shutil.copy2(src, lib / name)
    for root, dirs, files in os.walk(lib):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    lib.chmod(0o755)
    return lib


def test_as_a_plain_user_on_real_modes(nobody_home: tuple[int, Path]) -> None:
    uid, top = nobody_home
    python = _python_for(uid)
    if python is None:
        pytest.skip(f"no Python {sys.version_info[0]}.{sys.version_info[1]} that uid {uid} may run")
    home = top / "home"
    claude = home / ".claude"
    a = _project(claude, "-home-u-a")
    b = _project(claude, "-home-u-b")
    for p in [home, *home.rglob("*")]:
        os.chown(p, uid, uid, follow_symlinks=False)
    (a / "MEMORY.md").chmod(0o000)
    b.chmod(0o311)  # may be entered, not listed: a session still loads its MEMORY.md by name
    # the clone and its venv may sit in a folder uid 65534 cannot enter (`mktemp -d` makes one 0700, and
    # /root is 0700): memd and the packages `memd status` imports are copied where it can read them
    lib = _readable_copy_of_memd(top / "lib")
    env = {"HOME": str(home), "XDG_STATE_HOME": str(home / ".state"), "XDG_CONFIG_HOME": str(home / ".config"),
           "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(lib),
           "PYTHONDONTWRITEBYTECODE": "1"}
    r = subprocess.run(_as(uid, [python, "-m", "memd", "status"]), capture_output=True, text=True, env=env,
                       cwd=str(top), timeout=120, check=False)
    assert "No module named" not in r.stderr, r.stderr  # the copy must hold what status imports
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert "-home-u-a: MEMORY.md cannot be read (permission denied), so it cannot be measured" in r.stdout
    assert ("-home-u-b: the memory folder cannot be read: cannot list (Permission denied); what a session loads of"
            " MEMORY.md is within the budget") in r.stdout
    assert "regular file" not in r.stdout and "is ok the budget" not in r.stdout


def test_status_says_a_span_waits_to_be_retried_before_it_is_parked(claude_home: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Hole: `memd status` said nothing about a span the catch-up will try again (its run was refused,
    failed or capped) until it was parked, two days later. Now each project with such spans has a line:
    how many, tried how often, the last reason (redacted), when the next try comes, when it is parked."""
    import time
    import uuid

    from memd import layout
    from memd.config import Config
    from memd.state import StateStore

    name = "-home-u-app"
    _project(claude_home, name)
    sid = str(uuid.uuid4())
    path = claude_home / "projects" / name / f"{sid}.jsonl"
    path.write_text(json.dumps({"type": "user", "sessionId": sid, "message": {"role": "user", "content": "hi"}})
                    + "\n")
    key = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    now = time.time()
    max_tries = Config().catchup.max_tries
    with StateStore.open(layout.state_dir("")) as st:
        st.save_scan(path, project=name, inode=path.stat().st_ino, size=path.stat().st_size,
                     offset=path.stat().st_size, session_id=sid, records=1)
        for i in range(2):
            st.note_try(path, project=name, start=0, reason=f"refused: the guard said no ({key})",
                        when=now - 3600 + i, park_after=max_tries)
    code, out, _ = memd(capsys, "status")
    assert code == 0
    line = next((ln for ln in out.splitlines() if ln.startswith(f"catch-up: {name}:")), None)
    assert line is not None, out  # was: nothing
    assert "1 span(s) waiting to be retried" in line and f"tried 2 of {max_tries} times" in line
    assert "refused: the guard said no" in line and key not in out
    assert "tried again at the next catch-up" in line and f"parked after {max_tries} tries" in line
    code, out, _ = memd(capsys, "status", "--format", "json")
    doc = json.loads(out)
    assert doc["catchup_retries"]["projects"][name][0]["tries"] == 2
    # a third try: the next one waits catchup.retry_hours; parked: the warning says it, this line does not
    with StateStore.open(layout.state_dir("")) as st:
        st.note_try(path, project=name, start=0, reason="refused again", when=now, park_after=max_tries)
    _, out, _ = memd(capsys, "status")
    assert "the next try after " in out
    with StateStore.open(layout.state_dir("")) as st:
        st.note_try(path, project=name, start=0, reason="refused again", when=now, park_after=4)
    _, out, _ = memd(capsys, "status")
    assert f"catch-up: {name}:" not in out
