"""The daemon: only wiring. Watching (watch, debounce), condense warnings (budget), timing
(schedule: pure arithmetic), the main loop with signals (server), pid file and heartbeat (pidfile),
and service-manager notifications (notify). The work itself lives in memd.jobs."""
