"""What one hook run knows: options, the config (loaded only when needed) and memory-folder tests.

Most tool calls are not memory writes. For those the hook must decide "not mine" without loading
the config or any module beyond ``os`` and ``_json`` (not even ``re``), because its start-up time is paid on every tool
call. :meth:`HookContext.may_be_memory` is that cheap, conservative filter: it answers False only
when the path cannot be in a memory folder whatever the config says; everything else goes on to
:meth:`HookContext.memory_folder`, which decides exactly with the config and the Claude folder's
settings, as ``memd.layout`` does but with ``os.path`` only (``pathlib`` costs ~3 ms to import where
an editable install has not loaded it already).
"""

from __future__ import annotations

import os

from memd.hooks import log

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from memd.config import Config

_MAX_SMALL_FILE = 1 << 20  # settings.json and config.toml are a few KB


def _read_small(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read(_MAX_SMALL_FILE)
    except OSError:
        return None


# The plain TOML forms of the two settings the hook reads without loading the config (compiled only
# when a config file mentions them: importing ``re`` costs a Write outside memory half its start).
_CLAUDE_DIR = rb'claude_dir[ \t]*=[ \t]*"([^"\\]*)"[ \t]*(?:#.*)?'
_RECALL_FALSE = rb"recall[ \t]*=[ \t]*false[ \t]*(?:#.*)?"
_RECALL_OTHER = rb"recall_[a-z_]+[ \t]*=.*"


def _has_memory_parts(parts: list[str]) -> bool:
    """``.../projects/<x>/memory/<something>``: the shape of every memory path under a Claude folder (any
    case: on a case-insensitive file system ``Projects/x/MEMORY/`` is the same folder)."""
    return any(parts[i].lower() == "projects" and parts[i + 2].lower() == "memory" and parts[i + 1]
               for i in range(len(parts) - 3))


_INSENSITIVE: dict[str, bool] = {}


def case_insensitive(folder: str) -> bool:
    """Whether the file system holding ``folder`` (an existing folder) ignores case, as macOS's default
    APFS and Windows' NTFS do: the folder found again under its name with the case of its letters
    flipped is the same folder. False when it cannot tell (no letters, missing)."""
    known = _INSENSITIVE.get(folder)
    if known is not None:
        return known
    head, name = os.path.split(folder.rstrip(os.sep))
    flipped = name.swapcase()
    answer = False
    if flipped != name:
        try:
            answer = os.path.samefile(folder, os.path.join(head, flipped))
        except (OSError, ValueError):
            answer = False
    _INSENSITIVE[folder] = answer
    return answer


def within_any_case(path: str, folder: str) -> str | None:
    """``within`` ignoring case, for a folder on a case-insensitive file system (else None)."""
    rel = within(path.lower(), folder.lower())
    if rel is None or not case_insensitive(folder):
        return None
    return path[len(path) - len(rel):]


def _split(path: str) -> list[str]:
    return [p for p in path.split(os.sep) if p]


def within(path: str, folder: str) -> str | None:
    """path relative to folder when path lies strictly inside it (both absolute, normalised)."""
    folder = folder.rstrip(os.sep) or os.sep
    prefix = folder if folder.endswith(os.sep) else folder + os.sep
    if path.startswith(prefix) and len(path) > len(prefix):
        return path[len(prefix):]
    return None


class MemoryTarget:
    """A file inside a memory folder: the folder, the path relative to it, whether it is team memory."""

    __slots__ = ("memory_dir", "path", "rel")

    def __init__(self, memory_dir: str, path: str, rel: str) -> None:
        self.memory_dir = memory_dir
        self.path = path
        self.rel = rel

    @property
    def posix_rel(self) -> str:
        return self.rel.replace(os.sep, "/")

    @property
    def is_team(self) -> bool:
        from memd.core.paths import is_team  # not at import: only memory files get here

        return is_team(self.posix_rel)

    @property
    def index_rel(self) -> str:
        """The index this file belongs to, relative to the memory folder (team/ has its own)."""
        from memd.core.paths import INDEX_NAME, TEAM_INDEX

        return TEAM_INDEX if self.is_team else INDEX_NAME

    @property
    def is_index(self) -> bool:
        from memd.core.paths import is_index

        return is_index(self.posix_rel)


class HookContext:
    def __init__(self, config_path: str | None = None, claude_dir: str | None = None) -> None:
        self.config_path = config_path
        self.claude_dir_arg = claude_dir
        self._config: Config | None = None
        self._config_text: bytes | bool | None = False  # False: not read yet
        self._config_missing = False  # the config file does not exist (read: config_file_text)
        self.abandoned_work = False  # set when a helper thread outlived its deadline

    # ------------------------------------------------------------------ config

    @property
    def config(self) -> Config:
        """The config; a broken config raises ConfigError, which the entry turns into silence. Without
        a config file (the default path absent, no --config) its defaults, read without importing the
        schema (``memd.hooks.defaults``)."""
        if self._config is None:
            if self.config_path is None and self.config_file_text() is None and self._config_missing:
                from memd.hooks.defaults import Defaults

                cfg: Config = Defaults()  # type: ignore[assignment]  # (the attributes the hooks read)
            else:
                from memd import config

                cfg = config.load(self.config_path)
            self._config = cfg
        return self._config

    def valid_config(self) -> Config | None:
        """The config, or None when it is broken (``memd.errors`` is imported only then)."""
        try:
            return self.config
        except Exception as exc:
            from memd.errors import ConfigError

            if isinstance(exc, ConfigError):
                return None
            raise

    def config_file_text(self) -> bytes | None:
        if self._config_text is False:
            path = self.config_path
            if path is None:
                base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
                path = os.path.join(base, "memd", "config.toml")
            try:
                with open(path, "rb") as f:
                    self._config_text = f.read(_MAX_SMALL_FILE)
            except FileNotFoundError:
                self._config_text, self._config_missing = None, True
            except OSError:  # unreadable: config.load says why
                self._config_text = None
        return self._config_text if isinstance(self._config_text, bytes) else None

    def _setting_lines(self, key: str) -> list[bytes] | None:
        """Stripped non-comment lines of the config file that mention key; None: ask load()."""
        if self.config_path is not None and self._config_text is False and not os.path.exists(self.config_path):
            return None
        text = self.config_file_text()
        if text is None:
            return []
        k = key.encode()
        return [s for s in (ln.strip() for ln in text.splitlines()) if k in s and not s.startswith(b"#")]

    def recall_may_be_on(self) -> bool:
        """False when the config file cannot have turned recall on (absent, or a plain ``recall = false``).

        Users copy config.example.toml, which spells every key out; reading that one line spares
        every prompt the config load. Anything less plain (dotted keys, inline tables) means: load it.
        """
        lines = self._setting_lines("recall")
        if lines is None:
            return True
        if not lines:
            return False
        import re

        lines = [ln for ln in lines if not re.fullmatch(_RECALL_OTHER, ln)]
        return not (not lines or (len(lines) == 1 and re.fullmatch(_RECALL_FALSE, lines[0])))

    @property
    def state_dir(self) -> str:
        if self._config is not None and self._config.paths.state_dir:
            return os.path.expanduser(self._config.paths.state_dir)
        return log.default_state_dir()

    def log(self, level: str, event: str, **fields: Any) -> None:
        log.append(self.state_dir, level, event, **fields)

    # ------------------------------------------------------------------ the Claude folder

    def claude_dir_fast(self) -> str | None:
        """The Claude folder without loading the config, or None when only the config can tell."""
        if self.claude_dir_arg:
            return os.path.expanduser(self.claude_dir_arg)
        lines = self._setting_lines("claude_dir")
        if lines is None or len(lines) > 1:
            return None
        if lines:
            import re

            m = re.fullmatch(_CLAUDE_DIR, lines[0])
            if m is None:
                return None  # not the plain form: only the config loader can tell
            if m.group(1):
                return os.path.expanduser(m.group(1).decode("utf-8", "replace"))
        env = os.environ.get("CLAUDE_CONFIG_DIR")
        if env:
            return os.path.expanduser(env)
        return os.path.join(os.path.expanduser("~"), ".claude")

    def claude_dir(self) -> str:
        """--claude-dir, else the config's paths.claude_dir, else $CLAUDE_CONFIG_DIR, else ~/.claude
        (``memd.layout.claude_dir``, without pathlib)."""
        configured = ""
        if not self.claude_dir_arg:
            cfg = self.valid_config()  # finding memory folders must not depend on a valid config (the guard runs)
            configured = cfg.paths.claude_dir if cfg is not None else ""
        chosen = self.claude_dir_arg or configured or os.environ.get("CLAUDE_CONFIG_DIR")
        if chosen:
            return _clean(os.path.expanduser(chosen))
        return os.path.join(os.path.expanduser("~"), ".claude")

    # ------------------------------------------------------------------ memory folders

    def may_be_memory(self, path: str, cwd: str | None = None) -> bool:
        """Cheap filter: False only when path cannot be inside any memory folder (the session's ``cwd``:
        its project's settings may move its memory anywhere)."""
        if _has_memory_parts(_split(path)):
            return True
        if os.environ.get("CLAUDE_COWORK_MEMORY_PATH_OVERRIDE") or os.environ.get("CLAUDE_CODE_REMOTE_MEMORY_DIR"):
            return True  # the environment moves memory (memd.ccsettings): memory_folder decides
        if cwd and any(b"autoMemoryDirectory" in (_read_small(os.path.join(cwd, ".claude", n)) or b"")
                       for n in ("settings.json", "settings.local.json")):
            return True
        try:
            real = os.path.realpath(path)
        except (OSError, ValueError):
            return True
        if real != path and _has_memory_parts(_split(real)):
            return True
        claude = self.claude_dir_fast()
        if claude is None:
            return True
        settings = _read_small(os.path.join(claude, "settings.json"))
        return settings is not None and b"autoMemoryDirectory" in settings

    def memory_folder(self, path: str, cwd: str | None = None) -> MemoryTarget | None:
        """The memory folder path lies in (under projects/<x>/memory/, autoMemoryDirectory of any settings
        scope of the session in ``cwd``, or the environment's overrides), exactly."""
        from memd.ccsettings import guarded_folders, project_override  # os and json only, like this module

        claude = self.claude_dir()
        folders = guarded_folders(claude)
        own = project_override(claude, cwd) if cwd else None
        if own is not None:
            folders = [(own, False), *folders]
        candidates = [path]
        try:
            real = os.path.realpath(path)
            if real != path:
                candidates.append(real)
        except (OSError, ValueError):
            pass
        for exact in (True, False):  # then as a case-insensitive file system finds it (``…/MEMORY/x.md``)
            for cand in candidates:
                for folder, per_project in folders:
                    rel = within(cand, folder) if exact else within_any_case(cand, folder)
                    if rel is None:
                        continue
                    if not per_project:
                        return MemoryTarget(folder, cand, rel)
                    parts = rel.split(os.sep)
                    memory = parts[1] == "memory" if exact else len(parts) > 1 and parts[1].lower() == "memory"
                    if len(parts) >= 3 and memory and parts[0]:
                        return MemoryTarget(os.path.join(folder, parts[0], parts[1]), cand, os.sep.join(parts[2:]))
        return None


def _clean(path: str) -> str:
    """path with empty and "." parts and trailing separators dropped, as pathlib prints it ("a//b/." -> "a/b");
    unlike os.path.normpath, ".." is kept (it may follow a symlink)."""
    if not path:
        return "."
    parts = [p for p in path.split(os.sep) if p and p != "."]
    head = os.sep if path.startswith(os.sep) else ""
    if path.startswith(os.sep * 2) and not path.startswith(os.sep * 3):
        head = os.sep * 2  # POSIX leaves a leading "//" implementation-defined; pathlib keeps it
    return head + os.sep.join(parts) if parts or head else "."


def absolute(file_path: str, cwd: str | None) -> str:
    """The tool's file path made absolute the way Claude Code would (relative to the session cwd)."""
    p = os.path.expanduser(file_path)
    if not os.path.isabs(p):
        p = os.path.join(cwd or os.getcwd(), p)
    return os.path.normpath(p)
