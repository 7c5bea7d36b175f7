"""The daemon: only wiring. Watching (watch, debounce), condense warnings (budget), timing
(schedule: pure arithmetic), the main loop with signals (server), pid file and heartbeat (pidfile),
and service-manager notifications (notify). The work itself lives in memd.jobs.

May import: the core, the I/O edge and the work layer (``memd.jobs``, ``memd.llm``, ``memd.maintenance``);
never the door (``memd.cli``, ``memd.commands``, ``memd.hooks``), which reaches the daemon through
``control``, ``info`` and signals. The layers are checked by ``tests/test_layers.py``."""
