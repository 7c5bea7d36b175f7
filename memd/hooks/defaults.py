"""The config the hooks read when there is no config file: its defaults, without importing ``memd.config``.

Most users never write a config file, and importing the config schema (every key with its default,
bounds and description) and building it cost a memory write's hook about a quarter of an interpreter
start. These are the values the hook paths read, copied from the schema; tests/test_hook_fastpaths.py
holds each one equal to ``memd.config.Config()``'s. Anything else a section is asked for comes from
the real config (loaded then), so a hook that starts reading a new key is never wrong, only slower
until the key is added here.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# section -> key -> default (the values memd.config.Config() has)
VALUES: dict[str, dict[str, Any]] = {
    "budget": {"max_lines": 200, "max_chars": 25_000, "max_index_line": 150, "max_file_bytes": 4_000_000},
    "hooks": {"near_ratio": 0.8, "cc_budget_notes": "auto", "team_pii": True, "recall": False,
              "guard_max_chars": 1_000_000},
    "paths": {"claude_dir": "", "state_dir": ""},
}


class Section:
    """One config section at its defaults; a key not in ``VALUES`` is read from the real config."""

    def __init__(self, name: str) -> None:
        self.__dict__.update(VALUES[name])
        self._name = name

    def __getattr__(self, key: str) -> Any:  # only for keys not copied above
        from memd.config import Config

        return getattr(getattr(Config(), self._name), key)


class Defaults:
    """Stands in for ``memd.config.Config()`` on the hook paths (attribute reads only)."""

    def __init__(self) -> None:
        for name in VALUES:
            setattr(self, name, Section(name))

    def __getattr__(self, name: str) -> Any:  # a section not copied above
        from memd.config import Config

        return getattr(Config(), name)
