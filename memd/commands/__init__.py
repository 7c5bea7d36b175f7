"""memd commands, the door: one module per command (see memd.cli). A command parses its arguments,
calls one function below the door (memd.inspect, memd.maintenance, memd.jobs, memd.history, the
daemon's public API) and prints. Modules starting with ``_`` are shared door helpers (project selection,
running a job in the foreground), never logic other commands import from a command."""
