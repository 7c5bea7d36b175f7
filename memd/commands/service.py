"""`memd service install|uninstall|status [--dry-run]`: run memd as a user service (systemd or launchd)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memd.cli import Context

HELP = "install memd as a user service (systemd on Linux, launchd on macOS), remove it, or show it"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("install", "uninstall", "status"))
    p.add_argument("--dry-run", action="store_true", help="print the file (or what would be removed); write nothing")
    p.add_argument("--manager", choices=("systemd", "launchd"), default=None,
                   help="service manager (default: launchd on macOS, systemd elsewhere)")


_MARK = (b"memd run", b"com.memd.agent")


def run(args: argparse.Namespace, ctx: Context) -> int:
    import os

    from memd.daemon import service_files as sf
    from memd.daemon.pidfile import running_pid
    from memd.errors import MemdError
    from memd.store import atomic_write

    kind = args.manager or sf.default_kind()
    inst = sf.current(ctx.config.daemon.stop_timeout_s, ctx.state_dir, getattr(args, "config", None))
    t = sf.target(kind, inst)
    try:
        existing: bytes | None = t.path.read_bytes()
    except OSError:
        existing = None

    if args.action == "status":
        pid = running_pid(ctx.state_dir)
        state = "not installed" if existing is None else (
            "installed, up to date" if existing == t.content else
            "installed, differs from this installation (run `memd service install` again)")
        print(f"{kind} service {t.path}: {state}")
        print(f"daemon: {'running, pid ' + str(pid) if pid else 'not running'}")
        if existing is None:
            print(f"install it with: memd service install{'' if args.manager is None else ' --manager ' + kind}")
        return 0

    if args.action == "install":
        if args.dry_run:
            print(f"# would write {t.path}")
            print(t.content.decode(), end="" if t.content.endswith(b"\n") else "\n")
            print(f"# then start it with: {t.start}")
            return 0
        if existing is not None and existing != t.content and not any(m in existing for m in _MARK):
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
    if existing is not None and not any(m in existing for m in _MARK):
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
