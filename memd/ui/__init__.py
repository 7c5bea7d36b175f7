"""`memd ui`: the local memory viewer (issue 26).

``views`` gathers what a page shows through the same owners as the CLI (memd.inspect, memd.history,
memd.state, memd.sync.held), with every secret memd knows masked; ``server`` serves it on loopback with
the safety checks of docs/ui.md; ``templates/`` renders it with Jinja2 (autoescape on). Nothing here is
imported outside `memd ui` (tests/test_hook_imports.py and tests/test_cli_imports.py hold the lists).

A door, like memd.commands: it may import every layer below it (the core, the I/O edge, the work's
memd.inspect) and is imported only by ``memd.commands.ui``.
"""
