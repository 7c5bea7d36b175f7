"""The pinned Claude Code CLI: where it is cached, how it is installed, and how a test runs it.

One variable names the version: ``VERSION`` (env ``MEMD_REALCC_VERSION`` overrides it). The CLI is
installed once per version with ``npm install --prefix <cache> @anthropic-ai/claude-code@<version>``
into ``~/.cache/memd-tests/claude-code/<version>`` (env ``MEMD_REALCC_CACHE`` overrides the parent
folder), outside the repository. The npm package is a thin wrapper: the native binary lives in a
platform package (``@anthropic-ai/claude-code-linux-x64/claude``); ``find_binary`` looks there first.
``MEMD_REALCC_BIN`` names a binary directly and skips the install.

``Sandbox`` runs ``claude -p PROMPT --output-format json`` the way a person would, but isolated: its
own HOME (the Claude folder is ``HOME/.claude``; ``CLAUDE_CONFIG_DIR`` is unset), the Messages API
stand-in as ``ANTHROPIC_BASE_URL``, a fake key, telemetry, non-essential traffic and the updater
off, the cwd inside a fresh git repository, and a hard timeout.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.realcc.stub import CliStub

VERSION = os.environ.get("MEMD_REALCC_VERSION") or "2.1.332"
PACKAGE = "@anthropic-ai/claude-code"
_REAL_HOME = Path(os.path.expanduser("~"))  # read at import: tests move HOME later
CACHE_ROOT = Path(os.environ.get("MEMD_REALCC_CACHE") or _REAL_HOME / ".cache" / "memd-tests" / "claude-code")
RUN_TIMEOUT = 60.0
ROOT = Path(__file__).resolve().parent.parent.parent
MEMD = ROOT / ".venv" / "bin" / "memd"


def cache_dir(version: str = VERSION) -> Path:
    return CACHE_ROOT / version


def _platform_key() -> str:
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)
    system = {"darwin": "darwin", "linux": "linux"}.get(platform.system().lower(), platform.system().lower())
    musl = system == "linux" and not any(Path("/lib").glob("ld-linux*")) and any(Path("/lib").glob("ld-musl*"))
    return f"{system}-{arch}{'-musl' if musl else ''}"


def find_binary(cache: Path) -> Path | None:
    """The native claude binary under an npm prefix, or None."""
    scope = cache / "node_modules" / "@anthropic-ai"
    candidates = [scope / f"claude-code-{_platform_key()}" / "claude"]
    candidates += sorted(scope.glob("claude-code-*/claude"))
    # After its postinstall the wrapper's bin/claude.exe is the native binary too (a placeholder
    # script of a few KB otherwise).
    candidates.append(scope / "claude-code" / "bin" / "claude.exe")
    for c in candidates:
        try:
            if c.is_file() and c.stat().st_size > 1_000_000 and os.access(c, os.X_OK):
                return c
        except OSError:
            continue
    return None


def version_of(binary: Path) -> str:
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30,
                         env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(_REAL_HOME),
                              "DISABLE_AUTOUPDATER": "1"}, check=False)
    return out.stdout.split()[0] if out.stdout.strip() else ""


def ensure_cli(version: str = VERSION) -> tuple[Path | None, str]:
    """The binary of the pinned version, installing it when needed; (None, why) when it cannot be had."""
    explicit = os.environ.get("MEMD_REALCC_BIN")
    if explicit:
        p = Path(explicit)
        return (p, "") if p.is_file() else (None, f"MEMD_REALCC_BIN={explicit} is not a file")
    cache = cache_dir(version)
    found = find_binary(cache)
    if found is not None:
        return found, ""
    npm = shutil.which("npm")
    if npm is None:
        return None, (f"Claude Code {version} is not in {cache} and npm is not on PATH to install it "
                      f"(npm install --prefix {cache} {PACKAGE}@{version})")
    cache.mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.run([npm, "install", "--prefix", str(cache), "--no-audit", "--no-fund",
                               f"{PACKAGE}@{version}"], capture_output=True, text=True, timeout=600, check=False)
    except subprocess.TimeoutExpired:
        return None, f"npm install {PACKAGE}@{version} timed out"
    found = find_binary(cache)
    if found is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return None, f"npm install {PACKAGE}@{version} gave no native binary (rc {proc.returncode}): {tail}"
    return found, ""


MEMORY_HEADER = "Contents of {path} (user's auto-memory, persists across conversations):\n\n"
REMINDER_HEAD = ("<system-reminder>\nCodebase and user instructions are shown below. Be sure to adhere to these "
                 "instructions. IMPORTANT: These instructions OVERRIDE any default behavior and you MUST follow them "
                 "exactly as written.\n\n")


def cc_name(path: str | os.PathLike[str]) -> str:
    """Claude Code's folder name for an ASCII path of at most 200 characters (the tests' own temp
    folders): every character outside [A-Za-z0-9] becomes '-'. Kept apart from memd.layout on purpose."""
    s = os.fspath(path)
    assert s.isascii() and len(s) <= 200, s
    return re.sub(r"[^A-Za-z0-9]", "-", s)


def memory_block(body: dict[str, Any], memory_dir: Path) -> str | None:
    """The loaded MEMORY.md text Claude Code put into a request's first user message, or None."""
    head = MEMORY_HEADER.format(path=memory_dir / "MEMORY.md")
    msgs = body.get("messages") or []
    if not msgs or not isinstance(msgs[0].get("content"), list):
        return None
    for block in msgs[0]["content"]:
        text = block.get("text", "") if isinstance(block, dict) else ""
        i = text.find(head)
        if i < 0:
            continue
        rest = text[i + len(head):]
        end = rest.find("\n\nContents of ")  # another instruction file after it (none in a sandbox)
        rest = rest if end < 0 else rest[:end]
        return rest.removesuffix("\n</system-reminder>")
    return None


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def result(self) -> dict[str, Any]:
        data = json.loads(self.stdout)
        assert isinstance(data, dict)
        return data


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd),
                        "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"})


def init_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "commit", "-q", "--allow-empty", "-m", "init")
    return path


@dataclass
class Sandbox:
    """An isolated HOME with a git repository to work in, and the CLI talking to ``stub``."""

    binary: Path
    stub: CliStub
    base: Path  # a temp folder holding home/ and the repositories
    home: Path = field(init=False)
    repo: Path = field(init=False)

    def __post_init__(self) -> None:
        self.home = self.base / "home"
        (self.home / ".claude").mkdir(parents=True, exist_ok=True)
        self.repo = init_repo(self.base / "repo")

    @property
    def claude(self) -> Path:
        return self.home / ".claude"

    @property
    def projects(self) -> Path:
        return self.claude / "projects"

    @property
    def memory(self) -> Path:
        """The memory folder Claude Code uses for ``repo`` (created here, so a test can fill it)."""
        d = self.projects / cc_name(self.repo) / "memory"
        d.mkdir(parents=True, exist_ok=True)
        return d

    def main_requests(self, prompt: str) -> list[Any]:
        """The main-loop requests of the run started with ``prompt`` (the stub may be shared)."""
        from tests.realcc.stub import user_texts

        return [r for r in self.stub.main if prompt in user_texts(r.body)]

    def settings(self, data: dict[str, Any] | None = None) -> dict[str, Any]:
        """Read (and with ``data``, first replace) the user settings.json."""
        path = self.claude / "settings.json"
        if data is not None:
            path.write_text(json.dumps(data, indent=2), encoding="utf-8")
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return loaded if isinstance(loaded, dict) else {}

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "USER": os.environ.get("USER", "tester"),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_STATE_HOME": str(self.home / ".local" / "state"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "ANTHROPIC_BASE_URL": self.stub.base_url,
            "ANTHROPIC_API_KEY": "sk-ant-test-realcc-0000",
            "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "NO_PROXY": "127.0.0.1,localhost",
        }
        env.update(extra or {})
        return env

    def run(self, prompt: str, *, cwd: Path | None = None, args: tuple[str, ...] = (),
            env: dict[str, str] | None = None, timeout: float = RUN_TIMEOUT) -> Run:
        cmd = [str(self.binary), "-p", prompt, "--output-format", "json", *args]
        try:
            proc = subprocess.run(cmd, cwd=cwd or self.repo, env=self.env(env), capture_output=True, text=True,
                                  timeout=timeout, stdin=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            return Run(-1, out, err, timed_out=True)
        return Run(proc.returncode, proc.stdout, proc.stderr)

    def transcripts(self) -> list[Path]:
        return sorted(self.projects.glob("*/*.jsonl"))


def main() -> int:
    """``python -m tests.realcc.cli``: install the pinned CLI into its cache (CI runs this before pytest)."""
    binary, why = ensure_cli(VERSION)
    if binary is None:
        print(f"Claude Code {VERSION}: not available, tests/realcc will skip: {why}")
        return 0
    print(f"Claude Code {VERSION}: {binary} ({version_of(binary) or 'version unknown'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
