"""memd commands, the door: one module per command (see memd.cli), each with ``HELP``,
``add_arguments(parser)`` and ``run(args, ctx) -> int``; heavy imports stay inside ``run``.

A command parses its arguments, calls one function below the door (memd.inspect, memd.maintenance,
memd.jobs, memd.history, the daemon's public API) and prints. Modules starting with ``_`` are shared
door helpers (project selection, running a job in the foreground), never logic other commands import
from a command.

May import: every layer below the door (the core, the I/O edge, the work layer, the daemon: ``memd
run`` starts it) and ``memd.cli``; no layer below the door imports a command.
The layers are checked by ``tests/test_layers.py``.
"""
