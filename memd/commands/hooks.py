"""memd hooks install|uninstall|status: memd's hooks in Claude Code's settings.json."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memd.cli import Context

HELP = "install, remove or show memd's hooks in Claude Code's settings.json"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, text in (("install", "add memd's hooks (keeps every other setting and hook; backs up first)"),
                       ("uninstall", "remove memd's hooks, and only those"),
                       ("status", "show memd's hooks: exit 0 installed and current, 1 not installed or out of date, "
                                  "2 the settings file cannot be read")):
        sp = sub.add_parser(name, help=text, description=text)
        sp.add_argument("--settings", metavar="FILE",
                        help="the settings file (default: settings.json in the Claude folder)")
        if name == "status":
            sp.add_argument("--format", choices=("text", "json"), default="text", help="output format")
        else:
            sp.add_argument("--dry-run", action="store_true", help="show the result, write nothing")
        if name == "install":
            sp.add_argument("--console-script", action="store_true",
                            help="run the hook through the memd-hook script (slower start) instead of this "
                                 "interpreter with -I -S: for a Claude Code that ignores a hook's args")


def _describe(rows: list[Any]) -> list[str]:
    out: list[str] = []
    for r in rows:
        matcher = ("[" + r.matcher + "]") if r.matcher else "(all)"
        rule = f"  if {r.rule}" if r.rule else ""
        out.append(f"  {r.event:<17} {matcher:<24} {r.argv}{rule}  (timeout {r.timeout} s"
                   + (f", onFailure {r.on_failure})" if r.on_failure else ")"))
    return out


def _wanted(args: argparse.Namespace, ctx: Context) -> Any:
    from memd import settings_merge as sm

    command, hook_args = sm.hook_exec(getattr(args, "config", None),
                                      console_script=bool(getattr(args, "console_script", False)))
    return sm.Wanted(command, hook_args, sm.if_rules(ctx.claude_dir))


def run(args: argparse.Namespace, ctx: Context) -> int:
    from memd import settings_merge as sm

    path = sm.settings_path(ctx.claude_dir, args.settings)
    if args.action == "status":
        try:
            return _status(args, ctx, path, _wanted(args, ctx))
        except sm.SettingsError as e:
            print(f"memd: {e}", file=sys.stderr)
            return 2
    want = _wanted(args, ctx)
    if args.action == "install":
        if args.dry_run:
            loaded = sm.load(path)
            new = sm.with_memd(loaded.data, want)
            sys.stdout.write(sm.render(new))
            print(f"\n# memd's hooks as they would be in {loaded.path}:", file=sys.stderr)
            print("\n".join(_describe(sm.installed(new))), file=sys.stderr)
            _say_rules(want, sys.stderr)
            return 0
        change = sm.install(path, ctx.state_dir, want)
        if not change.changed:
            print(f"memd's hooks are already installed in {change.path}:")
            print("\n".join(_describe(change.after)))
            return 0
        print(f"memd's hooks installed in {change.path}" + (f" (backup: {change.backup})" if change.backup
                                                                else " (new file)") + ":")
        print("\n".join(_describe(change.after)))
        _say_rules(want, sys.stdout)
        if not ctx.config.hooks.recall:
            print("Recall (UserPromptSubmit) stays silent until `recall = true` under [hooks] in the config.")
        print("Sessions already running keep their old hooks until they are restarted.")
        return 0
    # uninstall
    if args.dry_run:
        loaded = sm.load(path)
        sys.stdout.write(sm.render(sm.without_memd(loaded.data)))
        return 0
    change = sm.uninstall(path, ctx.state_dir)
    if not change.changed:
        print(f"no memd hooks in {change.path}; nothing to remove")
        return 0
    print(f"removed {len(change.before)} memd hook(s) from {change.path} (backup: {change.backup})")
    return 0


def _say_rules(want: Any, out: Any) -> None:
    if want.rules is None:
        print("note: a memory folder's path has characters an `if` rule cannot hold; the tool hooks run for "
              "every Write/Edit and memd's own path test decides", file=out)


def _problems(rows: list[Any]) -> list[str]:
    from memd import settings_merge as sm

    problems: list[str] = []
    for r in rows:
        if r.args is not None:
            exe = r.command
        else:
            try:
                exe = shlex.split(r.command)[0]
            except (ValueError, IndexError):
                problems.append(f"{r.event}: cannot read the command {r.command!r}")
                continue
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            problems.append(f"{r.event}: {exe} is not an executable file (moved or deleted venv?)")
        start = sm.start_file_of(r.args) if r.args is not None else None
        if start is not None and not os.path.isfile(start):
            problems.append(f"{r.event}: {start} is not a file (memd uninstalled or moved?)")
    return sorted(set(problems), key=problems.index)


def _status(args: argparse.Namespace, ctx: Context, path: Path, want: Any) -> int:
    """Exit 0: installed and current; 1: not installed, out of date or pointing at a memd that is gone."""
    from memd import settings_merge as sm

    loaded = sm.load(path)
    rows = sm.installed(loaded.data)
    current = sm.is_current(loaded.data, want)
    # the console-script form (`install --console-script`, and every install before the lean start) is
    # memd's too, and current when chosen: a Claude Code that ignores `args` needs it
    script = sm.hook_exec(getattr(args, "config", None), console_script=True)
    by_script = not current and sm.is_current(loaded.data, sm.Wanted(*script, want.rules))
    current = current or by_script
    missing = [e for e in sm.EVENTS if e not in {r.event for r in rows}]
    problems = _problems(rows)
    if args.format == "json":
        print(json.dumps({
            "settings": str(loaded.path), "exists": loaded.existed, "current": current,
            "installed": [{"event": r.event, "matcher": r.matcher, "command": r.command, "args": r.args,
                           "if": r.rule, "timeout": r.timeout, "onFailure": r.on_failure} for r in rows],
            "missing": missing, "problems": problems, "console_script": by_script,
            "unguarded": sm.unguarded(ctx.claude_dir, None if any(r.rule is None for r in rows
                                                                   if r.event in sm.TOOL_EVENTS)
                                      else [r.rule for r in rows if r.event in sm.TOOL_EVENTS and r.rule]),
            "expected": {"command": want.command, "args": want.args, "if": want.rules},
            "recall_enabled": ctx.config.hooks.recall,
        }, indent=2))
        return 0 if current and not problems else 1
    if not rows:
        print(f"memd's hooks are not installed in {loaded.path}" + ("" if loaded.existed else " (no such file)"))
        print("Install them with: memd hooks install")
        return 1
    print(f"memd's hooks in {loaded.path}:")
    print("\n".join(_describe(rows)))
    if missing:
        print(f"missing: {', '.join(missing)}")
    if not current:
        print("not the current set for this memd and these memory folders: run `memd hooks install` to update them")
    tool_rules = [r.rule for r in rows if r.event in sm.TOOL_EVENTS]
    for folder in sm.unguarded(ctx.claude_dir, None if any(r is None for r in tool_rules) else
                               [r for r in tool_rules if r is not None]):
        print(f"not guarded: the memory folder {folder} is reached by no installed rule (a project's settings "
              "moved its memory there): run `memd hooks install`")
    if by_script:
        print("they start through the memd-hook script; `memd hooks install` writes the lean start "
              "(this venv's python -I -S), which starts faster, for a Claude Code that passes `args`")
    for p in problems:
        print(f"problem: {p}")
    print(f"recall (UserPromptSubmit): {'on' if ctx.config.hooks.recall else 'off (hooks.recall = false)'}")
    return 0 if current and not problems else 1
