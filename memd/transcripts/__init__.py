"""Claude Code session transcripts: reading them exactly once, as typed records, and rendering them.

- ``reader``: ``LineReader`` (incremental, to the last complete newline, bounded memory), ``is_active``.
- ``records``: typed values (``UserTurn``, ``AssistantTurn``, ``ToolUse``, ``ToolResult``,
  ``CompactSummary``, ``CompactBoundary``, ``ApiError``, ``Summary``) and ``parse``.
- ``sessions``: session ids, the memory folder a session feeds, memory-write detection.
- ``scan``: ``scan_project``/``scan_all`` (the scan consumer, advances scan offsets only) and
  ``read_span`` (the catch-up consumer's reader; it saves with ``StateStore.save_extract``).
- ``render``: ``render(records, Budgets)``, a pure function: the text a model sees.
- ``search``: ``search(files, needles, ...)``, the bounded read-only text search (the dream's tool).
"""
