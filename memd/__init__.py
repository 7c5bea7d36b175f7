"""memd: keeps Claude Code's auto memory healthy, unattended."""

__version__ = "0.1.0"
# The distribution's name (pyproject's ``name``): PyPI's ``memd`` is another project, so
# an install hint naming it would install that one. The commands stay ``memd`` and ``memd-hook``.
DISTRIBUTION = "memd-claude"


def install_hint(extra: str) -> str:
    """How to add one of memd's extras, from the index and from a clone (tests/test_distribution.py)."""
    return f"pip install '{DISTRIBUTION}[{extra}]' in memd's environment (from a clone: pip install '.[{extra}]')"
