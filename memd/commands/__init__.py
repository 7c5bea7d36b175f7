"""memd commands: one module per command (see memd.cli)."""
