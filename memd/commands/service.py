"""`memd service install|uninstall|status [--dry-run]`: run memd as a user service (systemd or launchd)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memd.cli import Context
    from memd.daemon.service_files import Install, Target

HELP = ("install memd as a user service (systemd on Linux, launchd on macOS), remove it, or show it "
        "(status exits 0 installed and current, 1 not installed or out of date, 2 on an error)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("install", "uninstall", "status"))
    p.add_argument("--dry-run", action="store_true", help="print the file (or what would be removed); write nothing")
    p.add_argument("--manager", choices=("systemd", "launchd"), default=None,
                   help="service manager (default: launchd on macOS, systemd elsewhere)")
    p.add_argument("--sandbox", choices=("auto", "off"), default="auto",
                   help="systemd: add the namespace sandbox (ProtectSystem=strict, PrivateTmp, ...) where this "
                        "machine supports it (auto, the default), or only the options that need no namespace (off)")


def _flags_given(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "config", None) or getattr(args, "claude_dir", None))


def _context_for(ctx: Context, flags: list[str]) -> Context:
    """The context the service runs in, given its global flags (those of an installed file)."""
    from memd.cli import Context

    ns = argparse.Namespace(**vars(ctx.args))
    ns.config = flags[flags.index("--config") + 1] if "--config" in flags[:-1] else None
    ns.claude_dir = flags[flags.index("--claude-dir") + 1] if "--claude-dir" in flags[:-1] else None
    return Context(ns)


def _writable(ctx: Context) -> tuple[tuple[Path, ...] | None, str | None]:
    """The folders the namespace sandbox leaves writable, or None with the reason it is not used."""
    from memd.daemon import sandbox

    claude = ctx.claude_dir
    if not claude.is_dir():
        # ProtectSystem=strict would keep a folder created later read-only until the next start
        return None, f"no Claude folder yet ({claude}); run `memd service install` again once it exists"
    reason = sandbox.namespaces_refused()
    if reason:
        return None, reason
    return (claude.resolve(), ctx.state_dir.expanduser().resolve()), None


def _wanted(args: argparse.Namespace, ctx: Context, kind: str, flags: list[str], python: str | None,
            sandboxed: bool | None) -> tuple[Install, str | None]:
    """What this installation would write, and why the namespace sandbox is off (None when on).
    ``sandboxed`` None: decide (probe); True/False: as an installed file has it."""
    from memd.daemon import service_files as sf

    writable: tuple[Path, ...] | None = None
    why: str | None = "launchd has no such sandbox" if kind == "launchd" else None
    if kind == "systemd":
        if sandboxed is False or (sandboxed is None and args.sandbox == "off"):
            why = "--sandbox off"
        elif sandboxed is True:
            claude = ctx.claude_dir
            writable = (claude.resolve(), ctx.state_dir.expanduser().resolve())
        else:
            writable, why = _writable(ctx)
    inst = sf.current(ctx.config.daemon.stop_timeout_s, ctx.state_dir, flags=flags, python=python,
                      writable=writable)
    return inst, why


def _advice(flags: list[str], kind: str, args: argparse.Namespace) -> str:
    import shlex

    cmd = ["memd", *flags, "service", "install"]
    if args.manager is not None:
        cmd += ["--manager", kind]
    return shlex.join(cmd)


def _status(args: argparse.Namespace, ctx: Context, kind: str) -> int:
    """Exit codes as `memd hooks status`: 0 installed and current, 1 not installed or out of date."""
    import sys

    from memd.commands._projects import config_warning, tolerant_config
    from memd.daemon import service_files as sf
    from memd.daemon.pidfile import running_pid

    # a bad config is what makes a unit fail with exit 2: status is where a user looks, so it goes on
    bad_config = tolerant_config(ctx)
    if bad_config is not None:
        print(config_warning("service status", bad_config), file=sys.stderr)
    flags = sf.global_flags(getattr(args, "config", None), getattr(args, "claude_dir", None))
    t = sf.target(kind, sf.current(ctx.config.daemon.stop_timeout_s, ctx.state_dir, flags=flags))
    try:
        existing: bytes | None = t.path.read_bytes()
    except FileNotFoundError:
        existing = None
    except OSError as e:
        print(f"{kind} service {t.path}: cannot read it ({e.strerror})")
        return 2
    run_ctx = ctx
    if existing is None:
        state, code = "not installed", 1
    elif not sf.is_memds(existing):
        state, code = "another program's file is there (not memd's)", 1
    else:
        split = sf.split_argv(sf.installed_argv(kind, existing) or [])
        python = None
        if split is not None:
            # the flags given at install hold unless others are given now; python and python3 of one
            # venv are one interpreter
            if not _flags_given(args):
                flags = split[1]
                run_ctx = _context_for(ctx, flags)
                bad_run = tolerant_config(run_ctx)
                if bad_run is not None and bad_config is None:
                    print(config_warning("service status", bad_run), file=sys.stderr)
            if sf.same_interpreter(split[0], sys.executable):
                python = split[0]
        sandboxed = b"\nProtectSystem=" in existing if kind == "systemd" else None
        inst, _ = _wanted(args, run_ctx, kind, flags, python, sandboxed)
        if existing == sf.target(kind, inst).content:
            state, code = "installed, up to date", 0
        else:
            state, code = f"installed, differs from this installation (run `{_advice(flags, kind, args)}` again)", 1
        if kind == "systemd":
            state += ("; sandbox: namespaces (ProtectSystem=strict, PrivateTmp, ...)" if sandboxed
                      else "; sandbox: the options that need no namespace")
    print(f"{kind} service {t.path}: {state}")
    if existing is not None and sf.is_memds(existing):
        code = max(code, _manager_state(kind, run_ctx))
    pid = running_pid(run_ctx.state_dir)
    print(f"daemon: {'running, pid ' + str(pid) if pid else 'not running'}")
    if existing is None:
        print(f"install it with: {_advice(flags, kind, args)}")
    return code


def _manager_state(kind: str, ctx: Context) -> int:
    """What the service manager says of the installed unit (its real state, not the file's): printed;
    1 when it failed (exit status, result, its last log lines), else 0."""
    import os

    from memd.daemon import service_files as sf
    from memd.daemon import service_state as ss

    st = ss.systemd_state(sf.UNIT_NAME) if kind == "systemd" else ss.launchd_state(sf.LABEL, os.getuid())
    print(f"unit: {ss.describe(st)}")
    if st.failed:
        log = st.log or _memd_log_tail(ctx, ss.LOG_LINES)
        if log:
            print("its last log lines" + ("" if st.log else f" (memd's log, {ctx.state_dir / 'memd.log'})") + ":")
            for line in log:
                print(f"  {line}")
        print("start it again once fixed: " + ("systemctl --user restart memd.service" if kind == "systemd"
                                               else f"launchctl kickstart -k gui/$(id -u)/{sf.LABEL}"))
    return 1 if st.failed else 0


def _memd_log_tail(ctx: Context, n: int) -> list[str]:
    try:
        with open(ctx.state_dir / "memd.log", "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 8192))
            return [ln.decode("utf-8", "replace") for ln in f.read().splitlines()[1:]][-n:]
    except OSError:
        return []


def run(args: argparse.Namespace, ctx: Context) -> int:
    import os

    from memd.daemon import service_files as sf
    from memd.errors import MemdError
    from memd.store import atomic_write

    kind = args.manager or sf.default_kind()
    if args.action == "status":
        return _status(args, ctx, kind)
    # every global flag given now is carried into the service (it must watch what you see)
    flags = sf.global_flags(getattr(args, "config", None), getattr(args, "claude_dir", None))
    if args.action == "install":
        inst, why = _wanted(args, ctx, kind, flags, None, None)
    else:
        inst = sf.current(ctx.config.daemon.stop_timeout_s, ctx.state_dir, flags=flags)
    t: Target = sf.target(kind, inst)
    try:
        existing: bytes | None = t.path.read_bytes()
    except FileNotFoundError:
        existing = None

    if args.action == "install":
        hidden = sf.hidden_by_private_tmp(inst) if inst.writable is not None else []
        sandbox_line = (f"sandbox: namespaces (ProtectSystem=strict, {'' if hidden else 'PrivateTmp, '}...; writable: "
                        f"{', '.join(map(str, inst.writable))})" if inst.writable is not None
                        else f"sandbox: only the options that need no namespace ({why})")
        if hidden:
            sandbox_line += (f"\nwarning: PrivateTmp left out: {hidden[0]} lies under /tmp, which PrivateTmp would "
                             "hide from the service (it could not start); memd's files are safer outside /tmp")
        if args.dry_run:
            # stdout is the file, byte for byte (`--dry-run > file` is a valid unit or plist); notes on stderr
            import sys

            print(f"# would write {t.path}", file=sys.stderr)
            if kind == "systemd":
                print(f"# {sandbox_line}", file=sys.stderr)
            print(f"# then start it with: {t.start}", file=sys.stderr)
            print(t.content.decode(), end="")
            return 0
        if existing is not None and existing != t.content and not sf.is_memds(existing):
            raise MemdError("exists and is not memd's; not overwritten", path=str(t.path))
        ctx.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)  # its working folder and launchd's logs
        t.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(t.path, t.content, mode=0o644)
        print(f"wrote {t.path}")
        if kind == "systemd":
            print(sandbox_line)
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
