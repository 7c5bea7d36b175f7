"""Claude Code hooks."""
