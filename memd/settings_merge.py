"""memd's hooks in Claude Code's settings.json: install, uninstall, status.

The file belongs to the user and to Claude Code; memd adds and removes only its own hook entries:

- memd's entries are recognised by their command (``<python> -I -S <.../memd/hooks/start.py>``, the
  ``memd-hook`` script, ``<.../memd> hook ...`` or ``... -m memd hook``), whatever path they were
  installed from, so a re-install after moving the venv, or after an older memd, replaces them;
- install puts each event's entry in a matcher group of its own (other tools' groups are never
  edited) and is idempotent: a second install with the same command changes nothing;
- every other key, hook and group is kept in order, and the file is edited minimally: only the
  top-level ``hooks`` member is replaced, added or removed, every other byte kept (``minimal_text``);
  a new file is written as JSON with a 2-space indent, as Claude Code writes it;
- a file that is not a JSON object, or whose ``hooks`` are not shaped the way Claude Code reads
  them, is left untouched with an error saying where;
- before every change the current file is copied to memd's state folder
  (``backups/settings.json.<UTC time>``, the last 20 kept), and the file from before memd's first
  edit is kept for good (``backups/settings.json.before-memd``): uninstall writes those bytes back
  when nothing else changed since. Not beside settings.json: Claude's folder is not memd's to litter;
- the write is atomic and refuses to clobber: if Claude Code rewrote the file meanwhile, memd
  stops with an error instead of overwriting it (run the command again).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memd.errors import MemdError

# event -> (matcher or None, timeout in seconds, onFailure). onFailure is "continue" everywhere, on purpose
# (docs/hooks.md, "When memd fails"): "block" would turn a memd that cannot start (a deleted venv) into a
# block on every memory write (PreToolUse) or every prompt (UserPromptSubmit). The secret guard still does
# not vanish silently: PreToolUse exits 1 with the reason on stderr when its check fails, which Claude
# Code reports as a hook error and records in the transcript, as it does a hook that cannot start.
EVENTS: dict[str, tuple[str | None, int, str]] = {
    "PreToolUse": ("Write|Edit|MultiEdit", 10, "continue"),
    "PostToolUse": ("Write|Edit|MultiEdit", 10, "continue"),
    "SessionStart": (None, 15, "continue"),
    "UserPromptSubmit": (None, 30, "continue"),
}
# The tools whose calls get an `if` rule per guarded folder. Claude Code 2.1.328 matches a rule by the
# tool's own name only (`Edit(...)` does not fire for Write, nor for NotebookEdit); it has no MultiEdit
# tool, and a rule naming one is accepted and never matches (tried: tests/realcc/test_hook_if.py).
IF_TOOLS = ("Write", "Edit", "MultiEdit")
TOOL_EVENTS = ("PreToolUse", "PostToolUse")  # `if` on any other event drops the hook (2.1.328)
HOOK_SCRIPT = "memd-hook"
# The lean start (docs/hooks.md, "How the hook starts"): this venv's interpreter, isolated (-I: no PYTHON*
# variables, no user site, no script or working folder on sys.path) and without site (-S: no .pth files,
# no editable finder), running the start file inside the installed package.
LEAN_FLAGS = ("-I", "-S")
START_FILE = "memd/hooks/start.py"  # relative to the folder that holds the memd package
BACKUPS_KEPT = 20
ORIGINAL = "settings.json.before-memd"  # the first backup, of the file before memd's first edit: kept for good
# "memd ... hook" (the word hook later on memd's line) is read by ``_memd_then_hook``: the pattern
# `memd\s+(?:.*\s)?hook` scanned the rest of the line from every "memd" (40 KB: 21 s)
_MEMD_WORD = re.compile(r"(?:^|(?<=[\s/\\\"']))memd(?:\.exe)?[\"']?(?=\s)")
_HOOK_WORD = re.compile(r"\shook(?=\s|\Z)")
_MEMD_COMMAND = re.compile(r"-m\s+memd\s+hook(?:\s|$)"
                           r"|(?:^|[\s/\\\"'])memd-hook(?:\.exe)?[\"']?(?:\s|$)"
                           r"|[/\\]memd[/\\]hooks[/\\]start\.py[\"']?(?:\s|$)")
# Characters a gitignore-style rule would read as a pattern. Claude Code 2.1.328 matched neither the raw
# nor a backslash-escaped form of a folder holding them (tried), so such a folder gets no `if` at all.
_GLOB_CHARS = frozenset("*?[]\\{}!#")


class SettingsError(MemdError):
    """settings.json cannot be used as it is: left untouched."""


def is_memd_command(command: object) -> bool:
    """A shell-form command (a string) that runs ``memd hook`` or ``memd-hook``."""
    return isinstance(command, str) and (_MEMD_COMMAND.search(command) is not None or _memd_then_hook(command))


def _memd_then_hook(command: str) -> bool:
    """Whether a word memd is followed by blanks and, on the line they end on, a word hook (what
    ``memd\\s+(?:.*\\s)?hook(?:\\s|$)`` says), in one pass: every "hook" is found once, and each memd
    looks up the first one after it."""
    from bisect import bisect_left

    hooks = [m.start() for m in _HOOK_WORD.finditer(command)]  # where the blank before a hook is
    if not hooks:
        return False
    newline = -1
    for m in _MEMD_WORD.finditer(command):
        k = m.end()
        while k < len(command) and command[k].isspace():
            k += 1  # the blanks after memd (newlines too)
        i = bisect_left(hooks, k - 1)
        if i == len(hooks):
            return False
        if newline < k:
            newline = command.find("\n", k)
            if newline < 0:
                newline = len(command)
        if hooks[i] <= newline:  # the blank before hook ends memd's line at the latest
            return True
    return False


def is_memd_hook(hook: object) -> bool:
    """One hook of a matcher group that is memd's: the exec form (``command`` + ``args``) memd writes
    now, or the shell form (one command string) of earlier installs."""
    if not isinstance(hook, dict):
        return False
    command, args = hook.get("command"), hook.get("args")
    if not isinstance(command, str):
        return False
    if not isinstance(args, list):
        return is_memd_command(command)
    name = os.path.basename(command).lower().removesuffix(".exe")
    if name == HOOK_SCRIPT:
        return True
    if name == "memd":
        return args[:1] == ["hook"]
    return args[:3] == ["-m", "memd", "hook"] or start_file_of(args) is not None


def start_file_of(args: list[Any]) -> str | None:
    """The start file of a lean-start hook's args (interpreter flags, then ``.../memd/hooks/start.py``)."""
    for a in args:
        if not isinstance(a, str):
            return None
        if not a.startswith("-"):
            return a if a.replace("\\", "/").endswith("/" + START_FILE) else None
    return None


def lean_executable() -> tuple[str, list[str]] | None:
    """(this interpreter, its lean-start args), or None when there is no interpreter path to write.

    ``sys.executable`` as it is, never resolved: a venv's ``bin/python`` is a link to the base
    interpreter, and only the link's path makes it this venv's. The start file is found from the
    ``memd`` package this process imported (site-packages, or the checkout of an editable install)."""
    import memd

    if not sys.executable:
        return None
    start = os.path.join(os.path.dirname(os.path.abspath(memd.__file__)), *START_FILE.split("/")[1:])
    if not os.path.isfile(start):
        return None
    return os.path.abspath(sys.executable), [*LEAN_FLAGS, start]


def memd_executable() -> tuple[str, list[str]]:
    """(command, leading args) that run this installation's hook through its console script, as
    absolute as it can be made (``install --console-script``; the lean start's fallback).

    ``memd-hook`` beside this interpreter (a venv's bin/) first, else on PATH: run with no arguments
    it is the hook, so a Claude Code too old to know ``args`` (which then runs ``command`` alone
    through a shell) still gets the hook, not ``memd``'s usage and exit 2 (a block of every write).
    Then ``memd hook`` the same way; else ``python -m memd hook`` with this interpreter.
    """
    bindir = Path(sys.executable).parent
    for script, lead in ((HOOK_SCRIPT, []), ("memd", ["hook"])):
        beside = bindir / (script + (".exe" if os.name == "nt" else ""))
        if beside.is_file() and os.access(beside, os.X_OK):
            return str(beside.absolute()), lead
        found = shutil.which(script)
        if found:
            return str(Path(found).absolute()), lead
    return str(Path(sys.executable).absolute()), ["-m", "memd", "hook"]


def hook_exec(config_path: str | None = None, executable: tuple[str, list[str]] | None = None, *,
              console_script: bool = False) -> tuple[str, list[str]]:
    """(command, args) of memd's hooks in exec form: no shell between Claude Code and memd. The lean
    start unless ``console_script`` (or when this interpreter has no path to write)."""
    command, lead = executable or (None if console_script else lean_executable()) or memd_executable()
    args = list(lead)
    if config_path:
        args += ["--config", str(Path(config_path).expanduser().absolute())]
    return command, args


def project_memory_folders(claude_dir: Path) -> list[str]:
    """The memory folders projects move with their own settings (``autoMemoryDirectory`` in a
    repository's ``.claude/settings.json`` or ``settings.local.json``): each project's working folder is
    read from its newest transcript, sorted, each once."""
    from memd import ccsettings, layout
    from memd.transcripts.sessions import project_cwds

    claude = os.path.abspath(claude_dir)
    out: set[str] = set()
    for project in layout.list_projects(Path(claude)):
        for cwd in project_cwds(project)[:1]:
            if os.path.isdir(cwd):
                folder = ccsettings.project_override(claude, cwd)
                if folder is not None:
                    out.add(folder)
    return sorted(out)


def rule_folders(claude_dir: Path) -> list[tuple[str, bool]]:
    """Every folder memd's hooks guard, as ``(folder, per_project)``: ``ccsettings.guarded_folders`` and the
    folders projects' own settings move memory to (each as written and, where a symlink makes it
    differ, resolved)."""
    from memd.ccsettings import guarded_folders

    out = guarded_folders(os.path.abspath(claude_dir))
    for folder in project_memory_folders(claude_dir):
        for f in (os.path.normpath(folder), os.path.realpath(folder)):
            if (f, False) not in out:
                out.append((f, False))
    return out


def unguarded(claude_dir: Path, rules: list[str] | None) -> list[str]:
    """The memory folders the installed ``if`` rules (``rules``; None: no rules, every write is seen) do
    not reach: a project that moved its memory since ``memd hooks install`` ran."""
    if rules is None:
        return []
    have = set(rules)
    home = os.path.expanduser("~").rstrip(os.sep)
    out: list[str] = []
    for folder, per_project in rule_folders(claude_dir):
        pattern = _rule_pattern(folder, per_project, home)
        if pattern is not None and any(f"{tool}({pattern})" not in have for tool in IF_TOOLS):
            out.append(folder)
    return out


def _rule_pattern(folder: str, per_project: bool, home: str) -> str | None:
    if any(c in _GLOB_CHARS or ord(c) < 32 for c in folder) or folder != folder.strip():
        return None
    under_home = bool(home) and folder.startswith(home + os.sep)
    shown = "~/" + folder[len(home) + 1:] if under_home else "/" + folder  # "/" + "/abs": "//abs"
    return shown.rstrip("/") + ("/*/memory/**" if per_project else "/**")


def if_rules(claude_dir: Path) -> list[str] | None:
    """The ``if`` rules that make Claude Code start memd's tool hooks only for memory files: one per
    tool and folder memd guards (``rule_folders``: projects' own memory folders too), or None when a folder cannot be
    written as a rule (then the tool hooks run for every write, as before ``if`` existed, and memd's
    own path test decides).

    Rule syntax as Claude Code 2.1.328 reads it (tried: tests/realcc/test_hook_if.py): ``~/`` is the
    home folder, ``//`` starts an absolute path (one ``/`` would be relative to the project), ``*`` is
    one path segment and ``**`` any number; matching is on the path as written with ``..`` resolved,
    case-insensitive, and does not follow symlinks (hence the resolved folders too).
    """
    home = os.path.expanduser("~").rstrip(os.sep)
    patterns: list[str] = []
    for folder, per_project in rule_folders(claude_dir):
        pattern = _rule_pattern(folder, per_project, home)
        if pattern is None:
            return None
        patterns.append(pattern)
    return [f"{tool}({p})" for tool in IF_TOOLS for p in patterns]


# --------------------------------------------------------------------------- reading


@dataclass
class Loaded:
    path: Path  # the real file (symlinks followed: a dotfiles manager's link stays a link)
    data: dict[str, Any]
    signature: Any  # memd.store.Signature, or None when the file does not exist
    existed: bool
    raw: bytes


def settings_path(claude_dir: Path, explicit: str | None = None) -> Path:
    return Path(explicit).expanduser() if explicit else claude_dir / "settings.json"


def load(path: Path) -> Loaded:
    from memd.memfolder.read import read_bounded

    real = Path(os.path.realpath(path))
    res = read_bounded(real, 16 * 1024 * 1024)
    if res.problem == "missing":
        return Loaded(real, {}, None, False, b"")
    if res.data is None or res.text is None:
        raise SettingsError(f"cannot read it ({res.problem}); left untouched", path=str(path))
    if not res.text.strip():
        return Loaded(real, {}, res.signature, True, res.data)
    try:
        data = json.loads(res.text)
    except ValueError as e:
        raise SettingsError(f"not valid JSON ({e}); left untouched — fix it and run the command again",
                            path=str(path)) from None
    if not isinstance(data, dict):
        raise SettingsError("not a JSON object; left untouched", path=str(path))
    _check_shape(data, path)
    return Loaded(real, data, res.signature, True, res.data)


def _check_shape(data: dict[str, Any], path: Path) -> None:
    hooks = data.get("hooks")
    if hooks is None:
        return
    if not isinstance(hooks, dict):
        raise SettingsError('"hooks" is not an object; left untouched', path=str(path))
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            raise SettingsError(f'"hooks.{event}" is not a list; left untouched', path=str(path))
        for i, g in enumerate(groups):
            if not isinstance(g, dict) or not isinstance(g.get("hooks", []), list):
                raise SettingsError(f'"hooks.{event}[{i}]" is not a matcher group with a "hooks" list; '
                                    "left untouched", path=str(path))


# --------------------------------------------------------------------------- pure edits


class Wanted:
    """What memd installs: the exec form and the tool hooks' ``if`` rules (None: no rule possible)."""

    def __init__(self, command: str, args: list[str], rules: list[str] | None) -> None:
        self.command = command
        self.args = list(args)
        self.rules = rules


def _entry(event: str, want: Wanted) -> dict[str, Any]:
    matcher, timeout, on_failure = EVENTS[event]
    group: dict[str, Any] = {}
    if matcher is not None:
        group["matcher"] = matcher
    base = {"type": "command", "command": want.command, "args": list(want.args)}
    tail = {"timeout": timeout, "onFailure": on_failure}
    if event in TOOL_EVENTS and want.rules:
        group["hooks"] = [{**base, "if": rule, **tail} for rule in want.rules]
    else:
        group["hooks"] = [{**base, **tail}]
    return group


def without_memd(data: dict[str, Any]) -> dict[str, Any]:
    """data with every memd hook removed (and groups and events that held only memd's)."""
    out = dict(data)
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return out
    new_hooks: dict[str, Any] = {}
    for event, groups in hooks.items():
        kept_groups = []
        for g in groups:
            inner = g.get("hooks", [])
            kept = [h for h in inner if not is_memd_hook(h)]
            if len(kept) == len(inner):
                kept_groups.append(g)
            elif kept:
                kept_groups.append({**g, "hooks": kept})
        if kept_groups or not groups:
            new_hooks[event] = kept_groups
    if new_hooks:
        out["hooks"] = new_hooks
    else:
        out.pop("hooks", None)
    return out


def with_memd(data: dict[str, Any], want: Wanted, events: list[str] | None = None) -> dict[str, Any]:
    """data with memd's hooks (one matcher group per event) and everything else kept."""
    out = without_memd(data)
    hooks = dict(out.get("hooks") or {})
    for event in events or list(EVENTS):
        hooks[event] = [*hooks.get(event, []), _entry(event, want)]
    out["hooks"] = hooks
    return out


@dataclass(frozen=True)
class Installed:
    event: str
    matcher: str | None
    command: str
    timeout: object
    args: list[str] | None = None  # None: the shell form of an earlier install
    rule: str | None = None  # the hook's `if`
    on_failure: object = None

    @property
    def argv(self) -> str:
        """The command as one line (for people; Claude Code runs ``command`` with ``args``, no shell)."""
        if self.args is None:
            return self.command
        return " ".join(shlex.quote(p) for p in [self.command, *self.args])


def installed(data: dict[str, Any]) -> list[Installed]:
    out: list[Installed] = []
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return out
    for event, groups in hooks.items():
        for g in groups if isinstance(groups, list) else []:
            if not isinstance(g, dict):
                continue
            for h in g.get("hooks", []) if isinstance(g.get("hooks"), list) else []:
                if is_memd_hook(h):
                    args = h.get("args")
                    rule = h.get("if")
                    out.append(Installed(event, g.get("matcher"), str(h.get("command")), h.get("timeout"),
                                         [str(a) for a in args] if isinstance(args, list) else None,
                                         rule if isinstance(rule, str) else None, h.get("onFailure")))
    return out


def render(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _members(text: str) -> list[tuple[str, int, int, int]] | None:
    """The top-level members of a JSON object text as (key, start of the key, start and end of the value),
    or None when the text is not one plain object (then memd renders the whole file)."""
    i, n = 0, len(text)

    def ws(i: int) -> int:
        while i < n and text[i] in " \t\r\n":
            i += 1
        return i

    def string_end(i: int) -> int:  # text[i] == '"'
        i += 1
        while i < n:
            c = text[i]
            if c == "\\":
                i += 2
                continue
            if c == '"':
                return i + 1
            i += 1
        raise ValueError("unclosed string")

    def value_end(i: int) -> int:
        depth = 0
        while i < n:
            c = text[i]
            if c == '"':
                i = string_end(i)
                if depth == 0:
                    return i
                continue
            if c in "{[":
                depth += 1
            elif c in "}]":
                if depth == 0:
                    return i
                depth -= 1
                if depth == 0:
                    return i + 1
            elif c == "," and depth == 0:
                return i
            i += 1
        raise ValueError("unclosed value")

    try:
        i = ws(i)
        if i >= n or text[i] != "{":
            return None
        i = ws(i + 1)
        out: list[tuple[str, int, int, int]] = []
        while i < n and text[i] != "}":
            if text[i] != '"':
                return None
            k_end = string_end(i)
            key = json.loads(text[i:k_end])
            j = ws(k_end)
            if j >= n or text[j] != ":":
                return None
            v = ws(j + 1)
            e = value_end(v)
            while e > v and text[e - 1] in " \t\r\n":
                e -= 1
            out.append((key, i, v, e))
            i = ws(e)
            if i < n and text[i] == ",":
                i = ws(i + 1)
        return out if i < n and not text[i + 1:].strip() else None
    except ValueError:
        return None


def minimal_text(raw: str, before: dict[str, Any], data: dict[str, Any]) -> str:
    """The file's text with only what memd changes changed: the top-level ``hooks`` member replaced,
    added or removed, every other byte of the user's file as it was (their order, spacing, key style).
    The whole file rendered anew only when it is not a plain object or more than ``hooks`` differs."""
    if {k: v for k, v in before.items() if k != "hooks"} != {k: v for k, v in data.items() if k != "hooks"}:
        return render(data)
    members = _members(raw)
    if members is None:
        return render(data)
    indent = next((ln[:len(ln) - len(ln.lstrip(" \t"))] for ln in raw.splitlines()[1:] if ln.strip()), "  ") or "  "
    nl = "\r\n" if "\r\n" in raw else "\n"

    def value(v: Any) -> str:
        text = json.dumps(v, indent=len(indent.expandtabs(4)) or 2, ensure_ascii=False)
        return text.replace("\n", nl + indent)

    hooks = [m for m in members if m[0] == "hooks"]
    if "hooks" in data and hooks:
        _, _k, start, end = hooks[-1]
        new = raw[:start] + value(data["hooks"]) + raw[end:]
    elif "hooks" in data:
        close = raw.rstrip().rfind("}")
        if members:
            last_end = members[-1][3]
            new = raw[:last_end] + "," + nl + indent + '"hooks": ' + value(data["hooks"]) + raw[last_end:]
        else:
            new = raw[:close] + nl + indent + '"hooks": ' + value(data["hooks"]) + nl + raw[close:]
    elif hooks:
        idx = members.index(hooks[-1])
        _, k_start, _v, end = hooks[-1]
        if idx > 0:  # from the end of the member before it: its comma and the line break go too
            new = raw[:members[idx - 1][3]] + raw[end:]
        elif len(members) > 1:  # the first member: up to the next one's key
            new = raw[:k_start] + raw[members[1][1]:]
        else:  # the only member: the object's braces stay, with nothing between
            new = raw[:raw.find("{") + 1] + raw[raw.rfind("}"):]
    else:
        return raw
    try:
        if json.loads(new) != data:
            return render(data)
    except ValueError:
        return render(data)
    return new


# --------------------------------------------------------------------------- writing


def backup(loaded: Loaded, state_dir: Path) -> Path | None:
    """Copy the current file into the state folder; None when there was no file."""
    if not loaded.existed:
        return None
    from memd import store

    folder = store.ensure_private_dir(state_dir / "backups")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    dest = folder / f"settings.json.{stamp}"
    n = 1
    while dest.exists():
        n += 1
        dest = folder / f"settings.json.{stamp}-{n}"
    store.atomic_write(dest, loaded.raw, expect=None, mode=0o600)
    original = folder / ORIGINAL
    if not original.exists() and not installed(loaded.data):  # the file as it was before memd ever edited it
        store.atomic_write(original, loaded.raw, expect=None, mode=0o600)
    olds = sorted(p for p in folder.glob("settings.json.*")
                  if not store.is_memd_temp(p.name) and p.name != ORIGINAL)
    for old in olds[:-BACKUPS_KEPT]:
        try:
            old.unlink()
        except OSError:
            pass
    return dest


def write(loaded: Loaded, data: dict[str, Any]) -> None:
    from memd import store
    from memd.errors import ConflictError

    try:
        loaded.path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SettingsError(f"cannot create its folder: {e.strerror}", path=str(loaded.path)) from None
    try:
        text = minimal_text(loaded.raw.decode("utf-8"), loaded.data, data) if loaded.existed else render(data)
        store.atomic_write(loaded.path, text, expect=loaded.signature, mode=None if loaded.existed else 0o600)
    except ConflictError:
        raise SettingsError("changed while memd was editing it (Claude Code may have written it); nothing "
                            "was written — run the command again", path=str(loaded.path)) from None
    except OSError as e:
        raise SettingsError(f"cannot write it: {e.strerror}", path=str(loaded.path)) from None


@dataclass
class Change:
    changed: bool
    backup: Path | None
    before: list[Installed]
    after: list[Installed]
    path: Path


def _key(i: Installed) -> str:
    return json.dumps([i.event, i.matcher, i.command, i.args, i.rule, i.timeout, i.on_failure], default=str)


def is_current(data: dict[str, Any], want: Wanted, events: list[str] | None = None) -> bool:
    """True when exactly memd's wanted entries are installed, in groups that hold only memd's hooks."""
    if sorted(_key(i) for i in installed(data)) != sorted(_key(i) for i in installed(with_memd({}, want, events))):
        return False
    hooks = data.get("hooks") or {}
    for groups in hooks.values():
        for g in groups:
            inner = g.get("hooks", [])
            if any(is_memd_hook(h) for h in inner) and not all(is_memd_hook(h) for h in inner):
                return False
    return True


def install(path: Path, state_dir: Path, want: Wanted, events: list[str] | None = None) -> Change:
    loaded = load(path)
    before = installed(loaded.data)
    if loaded.existed and is_current(loaded.data, want, events):
        return Change(False, None, before, before, loaded.path)
    new = with_memd(loaded.data, want, events)
    bak = backup(loaded, state_dir)
    write(loaded, new)
    return Change(True, bak, before, installed(new), loaded.path)


def refresh_rules(claude_dir: Path, state_dir: Path, path: Path | None = None) -> Change | None:
    """Keep installed hooks' ``if`` rules reaching every memory folder: when memd's tool hooks are
    installed with rules and a memory folder is reached by none (a project moved its memory since the
    install), install them again with the same start (command and arguments as installed) and the
    rules for every folder. None when there is nothing to do (no memd hooks, no rules, all reached)."""
    target = path or settings_path(claude_dir)
    loaded = load(target)
    rows = [r for r in installed(loaded.data) if r.event in TOOL_EVENTS]
    if not rows or any(r.rule is None or r.args is None for r in rows):
        return None
    if not unguarded(claude_dir, [r.rule for r in rows if r.rule]):
        return None
    rules = if_rules(claude_dir)
    if rules is None:
        return None
    events = sorted({r.event for r in installed(loaded.data)}, key=list(EVENTS).index)
    return install(target, state_dir, Wanted(rows[0].command, list(rows[0].args or []), rules), events)


def uninstall(path: Path, state_dir: Path) -> Change:
    loaded = load(path)
    before = installed(loaded.data)
    if not before:
        return Change(False, None, before, before, loaded.path)
    new = without_memd(loaded.data)
    bak = backup(loaded, state_dir)
    original = _original(state_dir, new)
    if original is not None:  # nothing else changed since memd's first edit: the user's exact bytes back
        _write_raw(loaded, original)
    else:
        write(loaded, new if new.get("hooks") != {} else {k: v for k, v in new.items() if k != "hooks"})
    return Change(True, bak, before, [], loaded.path)


def _original(state_dir: Path, data: dict[str, Any]) -> bytes | None:
    """The file as it was before memd's first edit (``ORIGINAL``), when it says what ``data`` says (an
    empty ``hooks`` table aside)."""
    path = state_dir / "backups" / ORIGINAL
    try:
        raw = path.read_bytes()
        old = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError):
        return None

    def plain(d: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in d.items() if not (k == "hooks" and v == {})}

    return raw if isinstance(old, dict) and plain(old) == plain(data) else None


def _write_raw(loaded: Loaded, raw: bytes) -> None:
    from memd import store
    from memd.errors import ConflictError

    try:
        store.atomic_write(loaded.path, raw, expect=loaded.signature)
    except ConflictError:
        raise SettingsError("changed while memd was editing it (Claude Code may have written it); nothing "
                            "was written — run the command again", path=str(loaded.path)) from None
    except OSError as e:
        raise SettingsError(f"cannot write it: {e.strerror}", path=str(loaded.path)) from None
