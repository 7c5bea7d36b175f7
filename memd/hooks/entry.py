"""``memd hook``: the one command Claude Code runs for every hook event memd is installed for.

It reads the event (JSON) from stdin, dispatches on ``hook_event_name`` and prints the hook's JSON
answer. It never breaks a session: on any failure (a bug, a broken config, an unreadable folder, a
slow model) it appends the error to memd's log and exits 0 with no output, except that a failed
PreToolUse (the secret guard) exits 1 with one line on stderr, a non-blocking error Claude Code
shows. It also runs on every matching tool call, so this module and the tool-use handlers import
only ``os``, ``sys`` and ``_json`` (``memd.core.jsonfast``: not ``json``, which imports ``re``) until
an event turns out to concern a memory folder.

Claude Code starts it as ``memd hooks install`` writes it: ``<venv python> -I -S .../memd/hooks/start.py``
(``start`` below); ``memd hook`` and the ``memd-hook`` script (``run``) reach ``main`` too.

Options (for the command line in settings.json): ``--config FILE``, ``--claude-dir DIR``.
"""

from __future__ import annotations

import os
import sys

from memd.core import jsonfast
from memd.hooks.context import HookContext

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import Any

    Handler = Callable[[dict[str, Any], HookContext], "dict[str, Any] | None"]

MAX_EVENT_BYTES = 32 * 1024 * 1024  # a Write event carries the whole file; memory files are small
MAX_OUTPUT_CHARS = 10_000  # Claude Code's cap on a hook's output strings

USAGE = """usage: memd hook [--config FILE] [--claude-dir DIR] < EVENT.json

Run by Claude Code for its hook events (install with `memd hooks install`). Reads one event as
JSON on stdin and prints memd's answer as JSON; prints nothing and exits 0 when it has nothing
to say or anything goes wrong (errors go to memd's log).
"""

# hook_event_name -> (module, function); modules are imported only for their own events
HANDLERS: dict[str, tuple[str, str]] = {
    "PreToolUse": ("memd.hooks.tool_use", "pre_tool_use"),
    "PostToolUse": ("memd.hooks.tool_use", "post_tool_use"),
    "SessionStart": ("memd.hooks.session", "session_start"),
    "UserPromptSubmit": ("memd.hooks.prompt", "user_prompt_submit"),
}


def _parse_argv(argv: list[str]) -> tuple[str | None, str | None, bool]:
    config: str | None = None
    claude: str | None = None
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok in ("-h", "--help"):
            return config, claude, True
        name, eq, value = tok.partition("=")
        if name in ("--config", "--claude-dir"):
            if not eq:
                i += 1
                if i >= len(argv):
                    raise ValueError(f"{name} needs a value")
                value = argv[i]
            if name == "--config":
                config = value
            else:
                claude = value
        else:
            raise ValueError(f"unknown argument {tok!r}")
        i += 1
    return config, claude, False


def clip(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


def _clip_all(value: Any) -> Any:
    if isinstance(value, str):
        return clip(value)
    if isinstance(value, dict):
        return {k: _clip_all(v) for k, v in value.items()}
    return value


def dispatch(event: dict[str, Any], hc: HookContext) -> dict[str, Any] | None:
    name = event.get("hook_event_name")
    target = HANDLERS.get(name) if isinstance(name, str) else None
    if target is None:
        return None  # an event memd has nothing to say about (or one newer than memd)
    __import__(target[0])  # not importlib.import_module: importing importlib costs a plain install ~0.5 ms
    handler: Handler = getattr(sys.modules[target[0]], target[1])
    return handler(event, hc)


TAIL_BYTES = 1 << 20  # of an event past MAX_EVENT_BYTES, the end kept (a file_path after the content)


def _tail(stream: Any) -> bytes:
    """The last ``TAIL_BYTES`` of what is left of stream (read in chunks, the rest dropped)."""
    tail = b""
    while True:
        chunk = stream.read(TAIL_BYTES)
        if not chunk:
            return tail
        tail = (tail + chunk)[-TAIL_BYTES:]


def run() -> int:
    """The ``memd-hook`` console script: ``memd hook`` without the ``hook`` argument. What installs
    before the lean start wrote (``memd hooks install --console-script`` still does, for a Claude
    Code that ignores ``args``)."""
    return main(sys.argv[1:])


class _SiteOnDemand:
    """Last on sys.meta_path of a lean start (``python -I -S memd/hooks/start.py``): a module found
    nowhere else (the SDK recall imports, in an editable install whose site-packages is not the
    folder that holds memd) makes it run ``site.main()`` once, which adds this venv's site-packages
    and its .pth files, and looks again. The hook paths themselves never get here: they import the
    standard library and memd only (tests/test_hook_imports.py)."""

    @staticmethod
    def find_spec(name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
                  ) -> ModuleSpec | None:
        sys.meta_path.remove(_SiteOnDemand)
        if path is not None:
            return None  # a submodule: its package was found, and decides
        import site

        site.main()
        for finder in sys.meta_path:
            if getattr(finder, "__name__", "") == "PathFinder":
                return finder.find_spec(name, None, target)
        return None


def start() -> int:
    """The hook as ``memd hooks install`` writes it: ``<venv python> -I -S .../memd/hooks/start.py``.

    It leaves with ``os._exit`` once ``main`` has returned: everything it writes is written by then (the
    answer flushed here, log lines with ``os.write``, files through ``with`` blocks or ``memd.store``), and
    the interpreter's teardown (unloading some 70 modules) costs a memory write's hook about a quarter of
    an interpreter start. Only this entry does it: ``main`` also runs inside tests and other processes."""
    if sys.flags.no_site:
        sys.meta_path.append(_SiteOnDemand)
    rc = main(sys.argv[1:])
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass  # Claude Code stopped listening: nothing more can reach it
    os._exit(rc)


def _write(out: str) -> None:
    try:
        buffer = getattr(sys.stdout, "buffer", None)
        if buffer is not None:  # UTF-8 whatever the locale says (-I ignores PYTHONIOENCODING)
            buffer.write((out + "\n").encode("utf-8", "surrogateescape"))
        else:
            sys.stdout.write(out + "\n")
        sys.stdout.flush()
    except OSError:
        # Claude Code stopped listening (timeout, cancelled tool call). Point stdout at devnull so
        # the interpreter's final flush cannot fail too and turn exit 0 into exit 120.
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives until exit
        except OSError:
            pass


def _answer(answer: dict[str, Any]) -> int:
    _write(jsonfast.dumps(_clip_all(answer)))
    return 0


def _denial(event: dict[str, Any] | None, raw: bytes, hc: HookContext, why: str) -> dict[str, Any] | None:
    """``tool_use.guard_failed``'s answer; a failure of its own denies outright when the raw event names a
    file tool (the last word of a guard that fails closed)."""
    try:
        from memd.hooks.tool_use import guard_failed

        return guard_failed(event, raw, hc, why)
    except Exception as exc:
        hc.log("error", "hook.guard_failed_failed", error=f"{type(exc).__name__}: {exc}"[:300])
        if any(b'"' + t + b'"' in raw for t in (b"Write", b"Edit", b"MultiEdit")):
            return {"hookSpecificOutput": {
                "hookEventName": "PreToolUse", "permissionDecision": "deny",
                "permissionDecisionReason": f"memd blocked this write: its secret guard could not check it ({why}). "
                                            "Retry it as a plain call (a file path and text)."}}
        return None


def _unreadable(raw: bytes, hc: HookContext, why: str) -> int:
    """An event that is no JSON memd can read: a PreToolUse that may write into memory is denied
    (``tool_use.guard_failed``), anything else gets no answer."""
    denial = _denial(None, raw, hc, why)
    return _answer(denial) if denial else 0


def main(argv: list[str]) -> int:
    try:
        config_path, claude_dir, want_help = _parse_argv(list(argv))
    except ValueError as e:
        # A broken command line in settings.json still must not break the session.
        HookContext().log("error", "hook.bad_arguments", error=str(e))
        print(f"memd hook: {e}", file=sys.stderr)
        return 0
    if want_help:
        sys.stdout.write(USAGE)
        return 0
    hc = HookContext(config_path, claude_dir)
    name: object = None
    raw = b""
    event: dict[str, Any] | None = None
    try:
        if sys.stdin is None or sys.stdin.isatty():
            sys.stderr.write(USAGE)
            return 0
        raw = sys.stdin.buffer.read(MAX_EVENT_BYTES + 1)
        if len(raw) > MAX_EVENT_BYTES:
            # too large to parse in the hook's time: a write into memory is denied with the reason (its
            # names read from the raw JSON), never let through unchecked (tool_use.oversized_event)
            hc.log("warning", "hook.event_too_large", bytes=len(raw))
            from memd.hooks.tool_use import oversized_event

            name, answer = oversized_event(raw, _tail(sys.stdin.buffer), hc)
            out = jsonfast.dumps(answer) if answer else ""
        else:
            try:
                parsed = jsonfast.loads(raw)
            except (ValueError, RecursionError, MemoryError) as e:
                # not JSON, not UTF-8, nested past the interpreter's limit, a number past Python's digits:
                # a PreToolUse among them may still be a memory write (its names read from the raw JSON)
                hc.log("warning", "hook.bad_event", error=f"not readable JSON: {type(e).__name__}: {e}"[:200])
                return _unreadable(raw, hc, f"memd could not read the tool call: {type(e).__name__}")
            if not isinstance(parsed, dict):
                hc.log("warning", "hook.bad_event", error="not a JSON object")
                return 0
            event = parsed
            name = event.get("hook_event_name")
            answer = dispatch(event, hc)
            out = jsonfast.dumps(_clip_all(answer)) if answer else ""
    except BaseException as exc:  # the one place where every failure is caught
        from memd.hooks.log import describe_exception

        described = describe_exception(exc)
        hc.log("error", "hook.failed", hook_event=str(name), **described)
        if isinstance(exc, Exception) and (name == "PreToolUse" or (event is None and raw)):
            # The secret guard fails closed: a memory write it could not check is denied, with what went
            # wrong and what to do. Any other call is no memory write: exit 1 is a non-blocking error to
            # Claude Code (the call goes ahead), shown to the user and recorded in the transcript with
            # this line. Every other event's failure only loses a note: silence.
            denial = _denial(event, raw, hc, described["error"][:300])
            if denial:
                return _answer(denial)
            sys.stderr.write(f"memd: the secret guard could not check this write ({described['error'][:300]}); "
                             "see memd's log (memd logs)\n")
            return 1
        return 0
    if out:
        _write(out)
    if hc.abandoned_work:
        # A model call outlived its deadline in a helper thread: leave now rather than wait for it.
        try:
            sys.stdout.flush()
        except OSError:
            pass
        os._exit(0)
    return 0
