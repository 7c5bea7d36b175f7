"""The owner of the memory folder: every walk and every read of one goes through this package.

- ``read``: the one bounded reader (``read_bounded``: whole files within a cap, or the head of a
  long one), and ``Signature``, what a file was when read. Lean: the hooks use it.
- ``walk``: the one walk policy (symlinks, hidden files and folders, ``team/``, depth and entry
  caps) and the kinds of file it finds, judged by ``memd.core.paths`` (which files are memory,
  which are topic files); ``locate`` and ``confined_problem`` answer the same for one path. Lean.
- ``folder``: a folder read into values: ``read_folder`` (check, rebuild, status), ``fingerprint``
  (the check cache), ``read_files`` / ``file_map`` (staging, history).
- ``manifest``: the one memory manifest, for recall and for the model jobs.

It may import ``memd.core``, ``memd.record`` and ``memd.errors``; nothing above the I/O edge.
This file imports nothing, so a hook pays only for the module it uses.
"""
