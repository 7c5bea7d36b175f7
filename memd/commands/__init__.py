"""memd commands, the door: one module per command (see memd.cli), each with ``HELP``,
``add_arguments(parser)`` and ``run(args, ctx) -> int``; heavy imports stay inside ``run``.

A command parses, calls one function of a lower layer and prints: the logic lives below it.
May import: every layer below the door (the core, the I/O edge, the work layer, the daemon: ``memd
run`` starts it) and ``memd.cli``; no layer below the door imports a command.
The layers are checked by ``tests/test_layers.py``.
"""
