"""Entry point of the `memd` console script and of `python -m memd`.

`memd hook` runs on every tool call of every Claude Code session, so it is routed to the hook
before the CLI (argparse, dataclasses, the command registry) is imported at all.
"""

from __future__ import annotations

import sys


def main() -> int:
    if sys.argv[1:2] == ["hook"]:
        from memd.hooks.entry import main as hook

        return hook(sys.argv[2:])
    from memd.cli import main as cli

    return cli()


if __name__ == "__main__":
    raise SystemExit(main())
