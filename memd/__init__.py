"""memd: keeps Claude Code's auto memory healthy, unattended."""

__version__ = "0.1.0"
