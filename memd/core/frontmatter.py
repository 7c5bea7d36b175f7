"""Topic files: YAML frontmatter + markdown body, parsed and rendered byte for byte.

Two shapes live side by side in real folders: flat ``name/description/type`` and nested
``name/description/metadata: {type, ...}``. Parsing keeps the original text, so rendering
an unchanged file gives back the same string (CRLF, unknown keys, odd spacing and all);
an edit rewrites only the lines of the keys it touches, in the shape the file already has.
"""

from __future__ import annotations

import re

from memd.record import Record, field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MEMORY_TYPES = ("user", "feedback", "project", "reference")
MAX_FRONTMATTER_CHARS = 64_000  # parse bound: real frontmatter is a few hundred characters

_OPEN = re.compile(r"\A(?:\ufeff)?---[ \t]*(\r?\n)")
_CLOSE = re.compile(r"^---[ \t]*(?:\r?\n|\Z)", re.M)


class FrontmatterError(ValueError):
    pass


class TopicFile(Record):
    text: str  # the whole file as read
    has_frontmatter: bool
    frontmatter_text: str  # the YAML between the fences ("" when absent)
    body_start: int  # offset of the body in text
    data: dict[str, Any] = field(default_factory=dict)
    error: str | None = None  # why the frontmatter could not be read at all (the file is kept as is)
    frontmatter_lines: int = 0  # lines from the opening fence to the closing fence, inclusive
    yaml_error: str | None = None  # strict YAML failed; ``data`` was read leniently, line by line

    @property
    def newline(self) -> str:
        return "\r\n" if "\r\n" in self.text else "\n"

    @property
    def body(self) -> str:
        return self.text[self.body_start:]

    @property
    def shape(self) -> str:
        """'flat', 'nested' or 'none'."""
        if not self.has_frontmatter:
            return "none"
        return "nested" if isinstance(self.data.get("metadata"), dict) else "flat"

    @property
    def name(self) -> str | None:
        v = self.data.get("name")
        return v.strip() if isinstance(v, str) and v.strip() else None

    @property
    def description(self) -> str | None:
        v = self.data.get("description")
        return v.strip() if isinstance(v, str) and v.strip() else None

    @property
    def type(self) -> str | None:
        v = self.data.get("type")
        meta = self.data.get("metadata")
        if v is None and isinstance(meta, dict):
            v = meta.get("type")
        return v.strip() if isinstance(v, str) else None

    @property
    def meta(self) -> dict[str, Any]:
        """Keys of the nested metadata table, or the flat keys other than name/description."""
        meta = self.data.get("metadata")
        if isinstance(meta, dict):
            return dict(meta)
        return {k: v for k, v in self.data.items() if k not in ("name", "description")}


def _loader() -> type[Any]:
    import yaml

    base: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return base


def _refuse_anchors(text: str, loader: type[Any]) -> None:
    """Raise on any anchor or alias: no alias bombs, and nothing Claude Code writes uses them.

    Checked on the event stream, because the C loader composes nodes in C and never calls a
    Python ``compose_node`` override."""
    import yaml

    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            what = "aliases" if isinstance(event, yaml.AliasEvent) else "anchors"
            mark = getattr(event, "start_mark", None)
            where = f" (line {mark.line + 2})" if mark is not None else ""
            raise FrontmatterError(f"YAML {what} are not allowed{where}")


_LOADER: type[Any] | None = None


def load_yaml(text: str) -> Any:
    global _LOADER
    import yaml

    if _LOADER is None:
        _LOADER = _loader()
    try:
        _refuse_anchors(text, _LOADER)
        return yaml.load(text, Loader=_LOADER)
    except FrontmatterError:
        raise
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise FrontmatterError(f"malformed YAML{where}: {problem}") from None
    except RecursionError:
        raise FrontmatterError("YAML nested too deeply") from None


def split(text: str) -> tuple[bool, str, int, int]:
    """(has_frontmatter, yaml_text, body_start, fence_lines) without parsing the YAML."""
    m = _OPEN.match(text)
    if not m:
        return False, "", 0, 0
    close = _CLOSE.search(text, m.end())
    if close is None:
        return False, "", 0, 0
    yaml_text = text[m.end():close.start()]
    return True, yaml_text, close.end(), yaml_text.count("\n") + 2


def parse(text: str) -> TopicFile:
    """Parse a topic file; never raises: a bad frontmatter is reported in ``error``."""
    has, yaml_text, body_start, nlines = split(text)
    if not has:
        return TopicFile(text, False, "", 0)
    if len(yaml_text) > MAX_FRONTMATTER_CHARS:
        return TopicFile(text, True, yaml_text, body_start, {}, "frontmatter too large", nlines)
    try:
        plain = yaml_text.replace("\r\n", "\n")
        data = (fast_yaml(plain) if plain.strip() else {})
        if data is None:
            data = load_yaml(plain)
    except FrontmatterError as e:
        # Real folders hold frontmatter that is not valid YAML ("description: a: b"); Claude Code
        # still reads its keys, so we do too, line by line, and report the YAML problem.
        lenient = parse_lenient(yaml_text)
        if lenient:
            return TopicFile(text, True, yaml_text, body_start, lenient, None, nlines, str(e))
        return TopicFile(text, True, yaml_text, body_start, {}, str(e), nlines)
    if not isinstance(data, dict):
        return TopicFile(text, True, yaml_text, body_start, {}, "frontmatter is not a mapping", nlines)
    return TopicFile(text, True, yaml_text, body_start, {str(k): v for k, v in data.items()}, None, nlines)


_FAST: tuple[re.Pattern[str], re.Pattern[str]] | None = None  # (key, nested key): compiled on first use


def _fast_patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    # Not at import: the PostToolUse hook imports this module for split() and parse_lenient() only.
    global _FAST
    if _FAST is None:
        # the value ends at its last non-space (spaces then one other character, repeated, taken
        # possessively): the lazy ``(.*?)[ ]*$`` it replaces retried the trailing spaces at every step
        _FAST = (re.compile(r"^([A-Za-z_][A-Za-z0-9_]*+):(?:[ ]++((?:[ ]*+[^ \n])*+))?[ ]*+$"),
                 re.compile(r"^([ ]++)([A-Za-z_][A-Za-z0-9_]*+):(?:[ ]++((?:[ ]*+[^ \n])*+))?[ ]*+$"))
    return _FAST


# YAML 1.1 words that a plain scalar would resolve to something other than a string
_NOT_STR = frozenset(("yes", "no", "true", "false", "on", "off", "y", "n", "null", "~", ""))


def _fast_plain(v: str) -> bool:
    return bool(v) and (v[0] not in "-+.0123456789~=<?:,[]{}#&*!|>'\"%@`" and v.lower() not in _NOT_STR
            and ": " not in v and " #" not in v and not v.endswith(":") and "\t" not in v
            and v.isprintable())


def fast_yaml(text: str) -> dict[str, Any] | None:
    """Frontmatter of the common simple shape, read without PyYAML; None when it is not that shape.

    Accepts only top-level ``key: plain value`` lines and one nested table of the same (the two
    shapes Claude Code writes). Every value accepted is one YAML would read as the same string;
    anything else (quotes, lists, numbers, dates, continuation lines, comments after values) is
    left to the real parser. Saves importing and running PyYAML for nearly every real file.
    """
    fast_key, fast_nested = _fast_patterns()
    data: dict[str, Any] = {}
    nested: dict[str, Any] | None = None
    nested_key: str | None = None
    indent: str | None = None
    for line in text.split("\n"):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[0] == " ":
            if nested is None:
                return None
            m = fast_nested.match(line)
            if m is None or (indent is not None and m.group(1) != indent):
                return None
            indent = m.group(1)
            value = m.group(3)
            if not value or not _fast_plain(value) or m.group(2).lower() in _NOT_STR:
                return None
            nested[m.group(2)] = value
            continue
        if nested_key is not None and nested is not None and not nested:
            data[nested_key] = None  # "key:" with nothing under it
        nested, nested_key, indent = None, None, None
        m = fast_key.match(line)
        if m is None or m.group(1).lower() in _NOT_STR:
            return None
        value = m.group(2)
        if value is None or value == "":
            nested, nested_key = {}, m.group(1)
            data[m.group(1)] = nested
            continue
        if not _fast_plain(value):
            return None
        data[m.group(1)] = value
    if nested_key is not None and nested is not None and not nested:
        data[nested_key] = None
    return data


_LINE_KEY = re.compile(r"^([A-Za-z_][\w\-]*):(?:[ \t]+(.*))?$")


def _unquote(v: str) -> str:
    v = v.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
        return v[1:-1]
    return v


def parse_lenient(yaml_text: str) -> dict[str, Any]:
    """Top-level ``key: value`` lines and one level of nesting, the value taken verbatim."""
    data: dict[str, Any] = {}
    current: dict[str, Any] | None = None
    for raw in yaml_text.replace("\r\n", "\n").split("\n"):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        if raw[0] in " \t":
            m = _LINE_KEY.match(raw.strip())
            if current is not None and m:
                current[m.group(1)] = _unquote(m.group(2) or "")
            continue
        m = _LINE_KEY.match(raw)
        if not m:
            current = None
            continue
        if m.group(2) is None or not m.group(2).strip():
            current = {}
            data[m.group(1)] = current
        else:
            current = None
            data[m.group(1)] = _unquote(m.group(2))
    return data


def render(tf: TopicFile) -> str:
    """The file's text (unchanged files render to the exact bytes they were read from)."""
    return tf.text


# Keys that state when a memory last changed: Claude Code writes ``metadata.modified`` on every memory
# Write/Edit (facts.md section 3); hand-written and older files use the others, at the top level.
DATE_KEYS = ("modified", "updated", "last_modified", "lastModified", "last_updated", "date")
_ISO_DATE = r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?\s*(?:Z|[+-]\d{2}:?\d{2})?)?"


def to_timestamp(value: object) -> float | None:
    """A frontmatter date as a POSIX time: an ISO 8601 date or date-time string (``Z``, an offset or
    none: local time), or the date/datetime PyYAML makes of an unquoted one; None for anything else."""
    import datetime as dt

    if isinstance(value, str):
        v = value.strip().strip("\"'")
        if not re.fullmatch(_ISO_DATE, v):  # (re caches it; not compiled at import: the hook imports this module)
            return None
        try:
            value = (dt.datetime.fromisoformat(v) if len(v) > 10 else dt.date.fromisoformat(v))
        except ValueError:
            return None
    if isinstance(value, dt.datetime):
        return value.timestamp()  # naive: local time, as a person writes it
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day).timestamp()
    return None


def modified_time(data: dict[str, Any]) -> float | None:
    """The newest "last changed" date the frontmatter states (``metadata.modified`` and the top-level
    ``DATE_KEYS``), as a POSIX time; None when it states none."""
    found: list[float] = []
    meta = data.get("metadata")
    for table in (data, meta if isinstance(meta, dict) else {}):
        for k in DATE_KEYS:
            t = to_timestamp(table.get(k))
            if t is not None:
                found.append(t)
    return max(found, default=None)


def key_paths(text: str) -> set[str]:
    """Every frontmatter key of a topic file's text, nested ones as ``metadata.originSessionId``
    (empty without readable frontmatter): what a rewrite must keep."""
    tf = parse(text)
    if not tf.has_frontmatter:
        return set()
    data = tf.data if tf.data else parse_lenient(tf.frontmatter_text)
    out: set[str] = set()
    for k, v in data.items():
        out.add(k)
        if isinstance(v, dict):
            out.update(f"{k}.{sub}" for sub in v)
    return out
