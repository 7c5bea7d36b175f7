"""memd's hooks in Claude Code's settings.json: install, uninstall, status.

The file belongs to the user and to Claude Code; memd adds and removes only its own hook entries:

- memd's entries are recognised by their command (``<.../memd> hook ...`` or ``... -m memd hook``),
  whatever path they were installed from, so a re-install after moving the venv replaces them;
- install puts each event's entry in a matcher group of its own (other tools' groups are never
  edited) and is idempotent: a second install with the same command changes nothing;
- every other key, hook and group is kept in order; the file is parsed and written as JSON
  (2-space indent, as Claude Code writes it);
- a file that is not a JSON object, or whose ``hooks`` are not shaped the way Claude Code reads
  them, is left untouched with an error saying where;
- before every change the current file is copied to memd's state folder
  (``backups/settings.json.<UTC time>``, the last 20 kept). Not beside settings.json: Claude's
  folder is not memd's to litter, and one fixed ``.memd-backup`` name would be overwritten by the
  second install, losing the pre-memd original;
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

# event -> (matcher or None, timeout in seconds)
EVENTS: dict[str, tuple[str | None, int]] = {
    "PreToolUse": ("Write|Edit|MultiEdit", 10),
    "PostToolUse": ("Write|Edit|MultiEdit", 10),
    "SessionStart": (None, 15),
    "UserPromptSubmit": (None, 30),
}
BACKUPS_KEPT = 20
_MEMD_COMMAND = re.compile(r"(?:^|[\s/\\\"'])memd(?:\.exe)?[\"']?\s+(?:.*\s)?hook(?:\s|$)|-m\s+memd\s+hook(?:\s|$)")


class SettingsError(MemdError):
    """settings.json cannot be used as it is: left untouched."""


def is_memd_command(command: object) -> bool:
    return isinstance(command, str) and bool(_MEMD_COMMAND.search(command))


def memd_executable() -> list[str]:
    """The command that runs this installation of memd, as absolute as it can be made.

    The console script beside this interpreter (a venv's bin/) first, then the script this
    process was started as, then one on PATH; else ``python -m memd`` with this interpreter.
    """
    beside = Path(sys.executable).parent / ("memd.exe" if os.name == "nt" else "memd")
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside.absolute())]
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name in ("memd", "memd.exe") and argv0.is_file():
        return [str(argv0.resolve())]
    found = shutil.which("memd")
    if found:
        return [str(Path(found).absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "memd"]


def hook_command(config_path: str | None = None, executable: list[str] | None = None) -> str:
    parts = [*(executable or memd_executable()), "hook"]
    if config_path:
        parts += ["--config", str(Path(config_path).expanduser().absolute())]
    return " ".join(shlex.quote(p) for p in parts)


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


def _entry(event: str, command: str) -> dict[str, Any]:
    matcher, timeout = EVENTS[event]
    group: dict[str, Any] = {}
    if matcher is not None:
        group["matcher"] = matcher
    group["hooks"] = [{"type": "command", "command": command, "timeout": timeout}]
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
            kept = [h for h in inner if not (isinstance(h, dict) and is_memd_command(h.get("command")))]
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


def with_memd(data: dict[str, Any], command: str, events: list[str] | None = None) -> dict[str, Any]:
    """data with memd's hooks (exactly one entry per event, ``command``) and everything else kept."""
    out = without_memd(data)
    hooks = dict(out.get("hooks") or {})
    for event in events or list(EVENTS):
        hooks[event] = [*hooks.get(event, []), _entry(event, command)]
    out["hooks"] = hooks
    return out


@dataclass(frozen=True)
class Installed:
    event: str
    matcher: str | None
    command: str
    timeout: object


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
                if isinstance(h, dict) and is_memd_command(h.get("command")):
                    out.append(Installed(event, g.get("matcher"), str(h.get("command")), h.get("timeout")))
    return out


def render(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


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
    olds = sorted(p for p in folder.glob("settings.json.*") if not store.is_memd_temp(p.name))
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
        store.atomic_write(loaded.path, render(data), expect=loaded.signature,
                           mode=None if loaded.existed else 0o600)
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


def _key(i: Installed) -> tuple[str, str, str, str]:
    return i.event, json.dumps(i.matcher), i.command, json.dumps(i.timeout, default=str)


def is_current(data: dict[str, Any], command: str, events: list[str] | None = None) -> bool:
    """True when exactly memd's wanted entries are installed, each alone in its group."""
    want = sorted(_key(i) for i in installed(with_memd({}, command, events)))
    have = installed(data)
    if sorted(_key(i) for i in have) != want:
        return False
    hooks = data.get("hooks") or {}
    for groups in hooks.values():
        for g in groups:
            inner = g.get("hooks", [])
            if len(inner) > 1 and any(isinstance(h, dict) and is_memd_command(h.get("command")) for h in inner):
                return False
    return True


def install(path: Path, state_dir: Path, command: str, events: list[str] | None = None) -> Change:
    loaded = load(path)
    before = installed(loaded.data)
    if loaded.existed and is_current(loaded.data, command, events):
        return Change(False, None, before, before, loaded.path)
    new = with_memd(loaded.data, command, events)
    bak = backup(loaded, state_dir)
    write(loaded, new)
    return Change(True, bak, before, installed(new), loaded.path)


def uninstall(path: Path, state_dir: Path) -> Change:
    loaded = load(path)
    before = installed(loaded.data)
    if not before:
        return Change(False, None, before, before, loaded.path)
    new = without_memd(loaded.data)
    bak = backup(loaded, state_dir)
    write(loaded, new)
    return Change(True, bak, before, [], loaded.path)
