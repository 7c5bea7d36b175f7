"""`memd service install|uninstall|status [--dry-run]`: run memd as a user service (systemd or launchd)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memd.cli import Context
    from memd.daemon.service_files import Target

HELP = ("install memd as a user service (systemd on Linux, launchd on macOS), remove it, or show it "
        "(status exits 0 installed and current, 1 not installed or out of date, 2 on an error)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("install", "uninstall", "status"))
    p.add_argument("--dry-run", action="store_true", help="print the file (or what would be removed); write nothing")
    p.add_argument("--manager", choices=("systemd", "launchd"), default=None,
                   help="service manager (default: launchd on macOS, systemd elsewhere)")


def _status(args: argparse.Namespace, kind: str, t: Target, existing: bytes | None, pid: int | None) -> int:
    """Exit codes as `memd hooks status`: 0 installed and current, 1 not installed or out of date."""
    from memd.daemon import service_files as sf

    if existing is None:
        state, code = "not installed", 1
    elif not sf.is_memds(existing):
        state, code = "another program's file is there (not memd's)", 1
    elif existing == t.content:
        state, code = "installed, up to date", 0
    else:
        state, code = "installed, differs from this installation (run `memd service install` again)", 1
    print(f"{kind} service {t.path}: {state}")
    print(f"daemon: {'running, pid ' + str(pid) if pid else 'not running'}")
    if existing is None:
        print(f"install it with: memd service install{'' if args.manager is None else ' --manager ' + kind}")
    return code


def run(args: argparse.Namespace, ctx: Context) -> int:
    import os

    from memd.daemon import service_files as sf
    from memd.daemon.pidfile import running_pid
    from memd.errors import MemdError
    from memd.store import atomic_write

    kind = args.manager or sf.default_kind()
    # every global flag given now is carried into the service (it must watch what you see)
    inst = sf.current(ctx.config.daemon.stop_timeout_s, ctx.state_dir, getattr(args, "config", None),
                      getattr(args, "claude_dir", None))
    t = sf.target(kind, inst)
    try:
        existing: bytes | None = t.path.read_bytes()
    except FileNotFoundError:
        existing = None
    except OSError as e:
        if args.action == "status":
            print(f"{kind} service {t.path}: cannot read it ({e.strerror})")
            return 2
        raise

    if args.action == "status":
        return _status(args, kind, t, existing, running_pid(ctx.state_dir))

    if args.action == "install":
        if args.dry_run:
            print(f"# would write {t.path}")
            print(t.content.decode(), end="" if t.content.endswith(b"\n") else "\n")
            print(f"# then start it with: {t.start}")
            return 0
        if existing is not None and existing != t.content and not sf.is_memds(existing):
            raise MemdError("exists and is not memd's; not overwritten", path=str(t.path))
        ctx.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)  # launchd's log paths live here
        t.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(t.path, t.content, mode=0o644)
        print(f"wrote {t.path}")
        print(f"start it with:\n  {t.start}")
        if kind == "systemd":
            print("to keep it running while you are logged out: loginctl enable-linger $USER")
            print("API key (optional): put ANTHROPIC_API_KEY=... in ~/.config/memd/env and chmod 600 it")
        else:
            print("API key (optional): set model.api_key_file in ~/.config/memd/config.toml")
        print("let memd speak inside Claude Code sessions too: memd hooks install")
        print("follow it: memd logs -f    stop and remove it: memd service uninstall")
        return 0

    # uninstall
    paths = [p for p in (t.path, *t.extra) if os.path.lexists(p)]
    if existing is not None and not sf.is_memds(existing):
        raise MemdError("is not memd's; not removed", path=str(t.path))
    if args.dry_run:
        for p in paths:
            print(f"would remove {p}")
        if not paths:
            print(f"nothing to remove ({t.path} is not there)")
        print(f"stop the running service with: {t.stop}")
        return 0
    if not paths:
        print(f"not installed ({t.path} is not there)")
        return 0
    for p in paths:
        os.unlink(p)
        print(f"removed {p}")
    print(f"a running service keeps running until stopped; stop and unload it with:\n  {t.stop}")
    return 0
