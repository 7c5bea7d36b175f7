"""memd config: validate a config file, or show the effective configuration with its defaults."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memd.cli import Context

HELP = "validate a config file, or show the effective configuration"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    v = sub.add_parser("validate", help="check a config file; every problem is reported at once",
                       description="Check a config file (default: --config, else ~/.config/memd/config.toml).")
    v.add_argument("file", nargs="?", metavar="FILE", help="the file to check")
    s = sub.add_parser("show", help="print the effective configuration (defaults filled in) as TOML",
                       description="Print the effective configuration, every key with its description; "
                                   "the keys the config file sets are marked.")
    s.add_argument("--bare", action="store_true", help="leave out the descriptions")
    for q in (v, s):
        q.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS,
                       help="config file (default: ~/.config/memd/config.toml)")


def run(args: argparse.Namespace, ctx: Context) -> int:
    from memd import config

    if args.config_command == "validate":
        explicit = args.file or getattr(args, "config", None)
        path = explicit or config.default_path()
        if not explicit and not path.exists():
            print(f"no config file at {path}: the defaults apply (valid)")
            _warn_unpriced(config.Config())
            return 0
        cfg = config.load(path)  # raises ConfigError (exit 2) listing every problem
        print(f"{path}: valid")
        _warn_unpriced(cfg)
        return 0
    explicit = getattr(args, "config", None)
    path = explicit or config.default_path()
    keys = config.file_keys(path) if (explicit or path.exists()) and not args.bare else set()
    if not args.bare:
        print(f"# keys marked 'set in {path}' come from that file; every other value is the default"
              if keys else f"# {path} sets nothing: every value is the default")
    print(config.render_toml(ctx.config, comments=not args.bare, from_file=keys, file_label=str(path)), end="")
    return 0


def _warn_unpriced(cfg: Any) -> None:
    """A model memd has no price for is valid but its cost would be unknown: said, not an error."""
    import sys

    from memd.llm.client import unpriced_models

    for m in unpriced_models(cfg):
        print(f"warning: model.prices has no price for {m!r}: its runs' cost will be unknown; add "
              f'[model.prices."{m}"] with input, output, cache_write and cache_read', file=sys.stderr)
