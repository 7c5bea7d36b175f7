"""The pure core: text and values in, values out. No file is read or written here, no config
loaded, no process or network reached; the golden tests live here.

- ``paths``: the memory folder's path rules (``INDEX_NAME``, ``is_team``, ``is_index``, ...);
- ``files``: a folder as plain values (``FileRecord``, ``FolderSnapshot``, ``Signature``);
- ``frontmatter``, ``index``, ``links``, ``dates``: topic files, MEMORY.md and its loaded view, links, dates;
- ``lint`` (with ``findings``), ``rebuild``: the check's findings and the index rebuild's plan;
- ``guard`` (with ``declared``, a run's declared forgetting): may a model run's result be applied;
- ``secrets`` (with ``secret_rules`` and the fast path ``fastscan``): secret and personal-data detection;
- ``budget``: ``Limits``, Claude Code's budgets, passed in as a value (``memd.config`` builds it).

May import: only ``memd.core`` and ``memd.record`` (and pure standard-library modules); any other
layer may import the core. ``tests/test_layers.py`` checks this, and that the core has no import cycle.
"""
