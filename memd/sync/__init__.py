"""Memory that follows the user across machines, through a git remote of the user's own (issue 15).

Layer: the work (``memd.sync.job`` runs a sync as a run like the others, through ``memd.apply``),
over an edge of its own: ``memd.sync.gitremote`` (memd's sync repository in the state folder and the
system ``git`` that fetches and pushes it), ``memd.sync.identity`` (which local folders are "the
same project") and ``memd.sync.evidence`` (conflicts kept for the next dream and ``memd status``).
``memd.sync.merge`` is pure (text in, text out). The edge modules may import the edge and the
core; the rest of the package may import the work layer too, never the daemon or the door.
See docs/sync.md.
"""
