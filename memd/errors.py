"""Exceptions that carry their context (the file; a config problem names its key path); the CLI turns
them into one-line messages. Imports nothing of memd: every layer may raise them."""

from __future__ import annotations


class MemdError(Exception):
    """A user-facing error: the message is what the user reads (no traceback)."""

    exit_code = 1

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path

    def __str__(self) -> str:
        msg = super().__str__()
        return f"{self.path}: {msg}" if self.path else msg


class UsageError(MemdError):
    """Bad command-line usage (exit 2)."""

    exit_code = 2


class ConfigError(MemdError):
    """An invalid configuration: every problem at once, each with its key path (exit 2)."""

    exit_code = 2

    def __init__(self, problems: list[str], *, path: str | None = None) -> None:
        self.problems = problems
        super().__init__("; ".join(problems) if problems else "invalid configuration", path=path)

    def __str__(self) -> str:
        head = f"{self.path}: invalid configuration" if self.path else "invalid configuration"
        return head + "".join(f"\n  - {p}" for p in self.problems)


class ConflictError(MemdError):
    """A file changed since it was read: memd refuses to clobber it."""
