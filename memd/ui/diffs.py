"""The unified diff of two states of a memory folder, as the viewer shows it (a run's timeline entry, an
undo's preview): its own module so the timeline and the actions need not reach into ``memd.ui.views``
(once a private ``_diff`` there, and with it an import circle views -> timeline -> views)."""

from __future__ import annotations

import difflib


def folder_diff(before: dict[str, bytes], after: dict[str, bytes]) -> list[str]:
    """The lines of a unified diff from ``before`` to ``after`` (relative path -> bytes; a path missing
    from one side was created or removed), file by file in path order; bytes not UTF-8 shown replaced."""
    out: list[str] = []
    for rel in sorted(set(before) | set(after)):
        a, b = before.get(rel), after.get(rel)
        if a == b:
            continue
        old = a.decode("utf-8", "replace").splitlines() if a is not None else []
        new = b.decode("utf-8", "replace").splitlines() if b is not None else []
        out.extend(difflib.unified_diff(old, new, f"a/{rel}" if a is not None else "/dev/null",
                                        f"b/{rel}" if b is not None else "/dev/null", lineterm=""))
    return out
