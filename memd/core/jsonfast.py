"""JSON in and out without the ``json`` package: its C accelerator ``_json`` alone (pure: text in, values out).

``json`` imports ``re`` (for two whitespace patterns and a string-escape pattern the C code does not
need), and ``re`` imports ``enum``, ``functools`` and ``collections``: about half an interpreter
start, paid by every hook run that does not otherwise need a regex (a Write outside memory, with a
Claude Code that ignores ``if``), and a few ms more where it does (``json`` compiles six patterns
at import). The hook's stdin, stdout and log lines, and the settings files ``memd.ccsettings``
reads for it, go through here. The C scanner and encoder ``json`` itself uses are called directly,
with ``json``'s defaults (strict strings, NaN and Infinity read and written, ``": "`` and ``", "``),
so the results are the same; where ``_json`` is missing (not CPython) ``json`` does the work.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_WS = " \t\n\r"  # json's whitespace


class _Context:
    """What ``_json.make_scanner`` reads from ``json.JSONDecoder`` (its defaults)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__

    def __init__(self) -> None:
        self.memo: dict[str, str] = {}  # (the C scanner keeps its own; json's Python scanner reads this)


_scan: Callable[[str, int], tuple[Any, int]] | None = None


def loads(data: bytes | str) -> Any:
    """``json.loads(data)``: the value, or ValueError (UnicodeDecodeError for bytes that are not UTF-8)."""
    global _scan
    if isinstance(data, bytes):
        if data[:1] in (b"\xef", b"\xfe", b"\xff") or b"\x00" in data[:4]:
            import json  # a BOM or UTF-16/32: json's own encoding detection

            return json.loads(data)
        data = data.decode("utf-8")
    if _scan is None:
        try:
            from _json import make_scanner
        except ImportError:
            import json

            return json.loads(data)
        _scan = make_scanner(_Context())  # type: ignore[arg-type]  # (it reads the attributes json's decoder has)
    start = len(data) - len(data.lstrip(_WS))
    try:
        value, end = _scan(data, start)
    except StopIteration as e:
        raise ValueError(f"Expecting value: char {e.value}") from None
    if data[end:].strip(_WS):
        raise ValueError(f"Extra data: char {end}")
    return value


def dumps(value: Any, *, default: Callable[[Any], Any] | None = None) -> str:
    """``json.dumps(value, ensure_ascii=False, default=default)``."""
    try:
        from _json import encode_basestring, make_encoder
    except ImportError:
        import json

        return json.dumps(value, ensure_ascii=False, default=default)

    def refuse(o: Any) -> Any:
        raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")

    encode = make_encoder({}, default or refuse, encode_basestring, None, ": ", ", ", False, False, True)
    return "".join(encode(value, 0))
