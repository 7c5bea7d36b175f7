"""Claude Code hooks: ``memd hook`` (see docs/hooks.md).

- ``start`` (a file Claude Code runs, not imported): ``<venv python> -I -S .../memd/hooks/start.py``, the
  lean start ``memd hooks install`` writes (docs/hooks.md, "How the hook starts");
- ``entry``: reads the event from stdin, dispatches on ``hook_event_name``, prints the answer, and turns
  every failure into silence (exit 0, no output) plus one log line;
- ``defaults``: the config values the hooks read when there is no config file (no schema import);
- ``context``: options, the lazily loaded config, and the memory-folder tests (a cheap filter first);
- ``tool_use``: PreToolUse (no secrets into memory) and PostToolUse (budget warnings, notes);
- ``session``: SessionStart (what the model cannot see; the daemon's open warnings);
- ``prompt``: UserPromptSubmit (recall, opt-in; the work is in ``memd.recall``);
- ``log``: one JSON line to memd's log with the standard library only.

Kept import-light: the tool-use path runs on every tool call.

May import: the layers below the door (the core, the I/O edge, ``memd.recall`` of the work layer);
never ``memd.cli`` or ``memd.commands`` (``memd hook`` skips the parser). The tool-use path keeps
to the standard library, ``memd.config`` and the core (tests/test_hooks.py checks its import list).
"""
