"""Flat TOML read with ``str`` methods alone: what a config file usually is, without ``tomllib``.

``tomllib`` costs a start-up some 25 ms of CPU (it compiles its patterns and imports ``datetime``,
``string`` and ``typing``), several times what the rest of a cached `memd check NAME` costs. Most config
files are a few ``key = value`` lines under ``[section]`` headers: :func:`parse` reads exactly that and
returns what ``tomllib.loads`` returns for it, and None for anything else, so the caller hands the text
to ``tomllib`` (which parses it, or says precisely what is wrong). None is always a safe answer; a dict is
an answer only when it is ``tomllib``'s (tests/test_tomlflat.py holds the two together over generated
texts).

Read here: ``[name]`` headers (a bare name, each once), bare keys (each once in its table), basic strings
without escapes, literal strings, ``true``/``false``, decimal integers and floats as TOML writes them, blank
lines and comments. Left to ``tomllib``: everything else (arrays, inline tables, dotted or quoted keys,
escapes, multi-line strings, dates, ``inf``, underscores in numbers, keys before the first header, CR).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# control characters TOML allows nowhere but a tab and a newline (a CR is left to tomllib)
_CONTROL = tuple(chr(c) for c in (*range(0x09), *range(0x0B, 0x20), 0x7F))
_DIGITS = frozenset("0123456789")
_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def parse(text: str) -> dict[str, Any] | None:
    """``tomllib.loads(text)`` for a flat file of tables and scalar keys; None for anything else."""
    if any(c in text for c in _CONTROL):
        return None
    out: dict[str, dict[str, Any]] = {}
    table: dict[str, Any] | None = None
    for raw in text.split("\n"):
        line = raw.strip(" \t")
        if not line or line[0] == "#":
            continue
        if line[0] == "[":
            end = line.find("]")
            name = line[1:end].strip(" \t") if end > 0 else ""
            if not _bare(name) or not _tail(line[end + 1:]) or name in out:
                return None
            table = out[name] = {}
            continue
        key, eq, rest = line.partition("=")
        key = key.rstrip(" \t")
        if table is None or not eq or not _bare(key) or key in table:
            return None
        value = _value(rest.lstrip(" \t"))
        if value is None:
            return None
        table[key] = value[0]
    return out


def _bare(name: str) -> bool:
    return bool(name) and _BARE.issuperset(name)


def _tail(rest: str) -> bool:
    """What may follow a header or a value on its line: blanks, then a comment or nothing."""
    rest = rest.lstrip(" \t")
    return not rest or rest[0] == "#"


def _value(text: str) -> tuple[Any] | None:
    """The value at the start of ``text`` (in a 1-tuple: a value may be false), when the rest of the line is
    blank or a comment; None when it is not a value this module reads."""
    if not text:
        return None
    quote = text[0]
    if quote in "\"'":
        end = text.find(quote, 1)
        if end < 0 or text.startswith(quote * 3):
            return None
        s = text[1:end]
        if quote == '"' and "\\" in s:
            return None
        return (s,) if _tail(text[end + 1:]) else None
    cut = len(text)
    for stop in " \t#":
        at = text.find(stop)
        if 0 <= at < cut:
            cut = at
    token = text[:cut]
    if not _tail(text[cut:]):
        return None
    if token in ("true", "false"):
        return (token == "true",)
    digits = token[1:] if token[:1] in "+-" else token
    whole, dot, rest = digits.partition(".")
    mantissa, e, exponent = (rest if dot else whole).partition("e" if "e" in digits else "E")
    if dot:
        whole_ok = _integer(whole) and bool(mantissa) and _DIGITS.issuperset(mantissa)
    else:
        whole_ok, mantissa = _integer(mantissa), ""
    if not whole_ok:
        return None
    if e:
        sign = exponent[:1] in ("+", "-")
        if not exponent[sign:] or not _DIGITS.issuperset(exponent[sign:]):
            return None
    if dot or e:
        return (float(token),)
    return (int(token),)


def _integer(digits: str) -> bool:
    """A TOML decimal integer's digits: no leading zero but in 0 itself."""
    return bool(digits) and _DIGITS.issuperset(digits) and (digits == "0" or digits[0] != "0")
