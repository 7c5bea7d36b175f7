"""The daemon: only wiring. The main loop with signals (server), the worker it holds (worker: jobs and
transcript scans on their own threads, reporting back through the loop's queue; child: dreams and
catch-ups in a child process with a hard time limit, so the daemon never loads the model SDK), watching (watch,
debounce), condense warnings (budget: read and measure), decisions as pure functions of values and an
injected clock (policy: once a night, warn/clear, relief; schedule: slot arithmetic), pid file and
heartbeat (pidfile), service-manager notifications (notify), requests from `memd trigger` (control),
what `memd status` shows of the daemon (info) and the service files (service_files).

May import memd.core, the I/O edge (memd.store, memd.memfolder, memd.state, memd.layout, memd.transcripts),
memd.jobs, memd.maintenance, memd.clock and memd.config; never memd.commands or memd.cli. Time comes
only from the ``Clock`` the daemon is given (memd.clock), passed on to the worker and the jobs.
The layers are checked by ``tests/test_layers.py``."""
