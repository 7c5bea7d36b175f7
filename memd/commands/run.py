"""`memd run`: the daemon in the foreground (a service manager, or you in a terminal, keeps it running)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memd.cli import Context

HELP = "run the daemon in the foreground: watch memory, warn, schedule jobs (stop with Ctrl-C or SIGTERM)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--console", choices=("auto", "yes", "no"), default="auto",
                   help="readable log lines besides the JSON log (auto, yes: on stderr on a terminal or under "
                        "journald, else on stdout, e.g. launchd's out log; no: none)")


def _serve_viewer(*args: Any) -> Any:
    """The viewer (memd.ui.service.serve), imported only when the daemon is asked to serve it."""
    from memd.ui.service import serve

    return serve(*args)


def run(args: argparse.Namespace, ctx: Context) -> int:
    import logging
    import os
    import sys
    from pathlib import Path

    from memd import config as config_mod
    from memd import layout
    from memd.daemon.server import Daemon

    cfg = ctx.config
    explicit_claude = getattr(args, "claude_dir", None)
    config_path = getattr(args, "config", None)

    def load() -> config_mod.Config:
        return config_mod.load(config_path)

    def claude_for(c: config_mod.Config) -> Path:
        return layout.claude_dir(explicit_claude, "" if explicit_claude else c.paths.claude_dir)

    # not on a terminal too: launchd's out log shows what a terminal would (memd.logs.console_stream)
    console = args.console != "no"
    daemon = Daemon(config=cfg, load_config=load, claude_dir_for=claude_for, state_dir=ctx.state_dir,
                    console=console, serve_viewer=_serve_viewer)
    from memd.daemon.pidfile import AlreadyRunning
    from memd.daemon.service_files import SERVICE_ENV

    try:
        code = daemon.run()
    except AlreadyRunning as e:
        if os.environ.get(SERVICE_ENV) != "launchd":
            raise  # exit 3 (the systemd unit's RestartPreventExitStatus has it)
        # launchd restarts any non-zero exit (it has no RestartPreventExitStatus): another daemon is the
        # one, so this start ends as done, and launchd leaves it down
        print(f"memd run: not run: {e} (exit 0 under launchd, which would restart a non-zero exit)",
              file=sys.stderr, flush=True)
        return 0
    logging.shutdown()
    if daemon.exit_now:
        # a job was abandoned mid-step: do not wait for its thread (or a library's atexit hooks)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code
