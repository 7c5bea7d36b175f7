"""The model side of memd: the Messages API client (``client``), the confined memory tool
(``memtool``), the dream's tools beside it (``resolvetool``, ``forgettool``) and the prompts (``prompts``).

May import: the core and the I/O edge (``memd.config``, ``memd.store``, ``memd.history``,
``memd.errors``); it sits in the work layer beside ``memd.jobs`` and ``memd.apply``, and never
imports the daemon or the door. The layers are checked by ``tests/test_layers.py``.
"""
