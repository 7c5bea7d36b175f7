"""Fuzzing targets shared by tests/test_fuzz.py (the quick tier) and bench/fuzz.py (the long tier).

Each target takes one hypothesis-drawn input and runs one of memd's parsers on it: the frontmatter
parser, the index (parse, Claude Code's loaded view, its links), lint over a two-file folder, the
secret scanner and redaction, the transcript reader, records and renderer, the memory tool's
``handle`` and the hook's stdin (``memd.hooks.entry.main``). ``run`` calls a target under a deadline
of ``FLOOR`` seconds plus ``RATIO`` times a plain regex scan of the input's text: no exception may
escape (the memory tool and the hook turn everything into an answer), and no input may take longer.

Texts are drawn from pieces that make parsers work: backticks, brackets, comment and frontmatter
markers, blank runs, secret prefixes, zero-width and fullwidth characters, then repeated up to tens
of kilobytes, so that a quadratic path shows up as a blown deadline, not just a slow run.
"""

from __future__ import annotations

import io
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tests import regex_audit as ra

FLOOR = 2.0  # seconds every input may take whatever its size (start-up of a parser, a loaded machine)
RATIO = 3000  # and this many plain scans of its text

PIECES = ["`", "``", "```", "[", "]", "](", ")", "![", "<", ">", "<!--", "-->", "---", "---\n", "\n", "\r\n", " ",
          "  ", "\t", "\\", "#", "# ", "- ", "- [", "* ", "1. ", ">", ":", ": ", "=", '"', "'", "{", "}", "|", "~~~",
          "name: ", "description: ", "type: ", "metadata:\n  ", "sk-", "sk-ant-", "AKIA", "ghp_", "eyJ", "xoxb-",
          "password is ", "token: ", "-----BEGIN ", "PRIVATE KEY-----", "MII", "=\n", "aaaa", "AAAA", "0000",
          "yesterday", "2026-03-05", "\u200b", "\u00a0", "\u3000", "\uff53\uff4b", "\ufeff", "\u2028", "é", "😀",
          "\x00", "&", "*", "@", "%", "data:image/png;base64,", "machine x login y password z",
          "{\"files\": [", "T3BlbkFJ"]

_piece = st.one_of(st.sampled_from(PIECES), st.text(max_size=8))
_chunk = st.lists(_piece, max_size=40).map("".join)


@st.composite
def texts(draw: st.DrawFn, max_repeat: int = 2000) -> str:
    """A text made of parser-stressing pieces, its middle repeated up to ``max_repeat`` times."""
    head, middle, tail = draw(_chunk), draw(_chunk), draw(_chunk)
    repeat = draw(st.one_of(st.just(1), st.integers(1, max_repeat)))
    return head + middle * repeat + tail


_json_scalar = st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30), st.floats(allow_nan=True),
                         texts(50))
_json = st.recursive(_json_scalar, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                           st.dictionaries(st.text(max_size=10), inner, max_size=4)),
                     max_leaves=12)


@st.composite
def transcript_lines(draw: st.DrawFn) -> bytes:
    """Lines of a session transcript: records of Claude Code's shapes with drawn fields, garbage,
    cut lines and records joined without a newline."""
    lines: list[bytes] = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["user", "assistant", "system", "summary", "attachment", "x-new", "garbage"]))
        if kind == "garbage":
            lines.append(draw(st.binary(max_size=200)))
            continue
        content = draw(st.one_of(texts(200), st.lists(st.fixed_dictionaries(
            {"type": st.sampled_from(["text", "thinking", "tool_use", "tool_result", "image", "?"]),
             "text": texts(200), "name": st.sampled_from(["Write", "Edit", "Bash", "x"]), "input": _json,
             "content": st.one_of(texts(200), _json), "is_error": st.booleans(), "id": st.text(max_size=5)}),
            max_size=4), _json))
        rec: dict[str, Any] = {"type": kind, "uuid": draw(st.text(max_size=8)), "timestamp": draw(st.one_of(
            st.just("2026-03-05T10:00:00Z"), st.text(max_size=30), _json_scalar)),
            "message": {"role": kind, "content": content, "id": draw(st.text(max_size=4))},
            "isSidechain": draw(st.booleans()), "isMeta": draw(st.booleans()), "cwd": draw(st.text(max_size=20))}
        if draw(st.booleans()):
            rec.update(draw(st.dictionaries(st.text(max_size=12), _json, max_size=3)))
        line = json.dumps(rec, ensure_ascii=draw(st.booleans())).encode()
        if draw(st.integers(0, 9)) == 0:
            line = line[:draw(st.integers(0, len(line)))]  # cut mid-write
        lines.append(line)
    sep = b"" if draw(st.integers(0, 9)) == 0 else b"\n"  # joined without a newline, now and then
    return sep.join(lines) + draw(st.sampled_from([b"", b"\n"]))


@st.composite
def memtool_inputs(draw: st.DrawFn) -> Any:
    command = draw(st.sampled_from(["view", "create", "str_replace", "insert", "delete", "rename", "?", None]))
    path = draw(st.one_of(st.sampled_from(["/memories", "/memories/a.md", "/memories/MEMORY.md", "/memories/new.md",
                                           "/memories/team/t.md", "/memories/../x.md", "/memories/.h.md",
                                           "/memories/d/e.md", "/etc/passwd", "/memories/a.md\x00"]),
                          texts(20), _json_scalar))
    inp: dict[str, Any] = {"command": command, "path": path}
    for key in draw(st.lists(st.sampled_from(["file_text", "old_str", "new_str", "insert_line", "insert_text",
                                              "old_path", "new_path", "view_range"]), max_size=4)):
        inp[key] = draw(st.one_of(texts(300), _json_scalar, st.lists(st.integers(-5, 50), max_size=3)))
    return draw(st.one_of(st.just(inp), _json))


@st.composite
def hook_events(draw: st.DrawFn) -> bytes:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=300))
    name = draw(st.sampled_from(["PreToolUse", "PostToolUse", "SessionStart", "UserPromptSubmit", "SessionEnd",
                                 "PreCompact", "Stop", "x"]))
    tool = draw(st.sampled_from(["Write", "Edit", "MultiEdit", "Bash", "Read", None]))
    where = draw(st.sampled_from(["{claude}/projects/-w/memory/a.md", "{claude}/projects/-w/memory/MEMORY.md",
                                  "{claude}/projects/-w/memory/team/t.md", "/tmp/elsewhere.md", "", "relative.md"]))
    tool_input = draw(st.one_of(st.fixed_dictionaries({
        "file_path": st.just(where), "content": texts(500), "old_string": texts(50), "new_string": texts(500),
        "edits": st.lists(st.fixed_dictionaries({"old_string": texts(20), "new_string": texts(300)}), max_size=3)}),
        _json))
    event: dict[str, Any] = {"hook_event_name": name, "tool_name": tool, "tool_input": tool_input, "cwd": "/",
                             "session_id": draw(st.text(max_size=8)), "prompt": draw(texts(200)),
                             "transcript_path": draw(st.sampled_from(["", "/nonexistent.jsonl"]))}
    if draw(st.booleans()):
        event.update(draw(st.dictionaries(st.text(max_size=10), _json, max_size=3)))
    return json.dumps(event, ensure_ascii=draw(st.booleans())).encode()


# --------------------------------------------------------------------------- targets


def t_frontmatter(text: str) -> None:
    from memd.core import frontmatter

    tf = frontmatter.parse(text)
    _ = (tf.name, tf.description, tf.type, tf.body, tf.meta, tf.shape)
    frontmatter.key_paths(text)
    frontmatter.parse_lenient(text)
    frontmatter.fast_yaml(text)
    frontmatter.render(tf)


def t_index(text: str) -> None:
    from memd.core import index, links

    idx = index.parse(text)
    links.index_links(idx)
    index.loaded_view(text, idx=idx)
    index.measure(text)
    for ln in idx.lines:
        links.mask_code(ln)


def t_lint(pair: tuple[str, str]) -> None:
    from memd.core.files import FolderSnapshot
    from memd.core.lint import lint

    lint(FolderSnapshot.from_texts({"MEMORY.md": pair[0], "a.md": pair[1], "b/c.md": pair[1][:200]}))


def t_secrets(text: str) -> None:
    from memd.core import secrets

    hits = secrets.scan(text)
    out = secrets.redact(text, marker="\x00{kind}\x00")
    if "\x00" not in text:
        assert out.count("\x00") == 2 * len(hits), "redaction and scan disagree"


class _Dirs:
    """Folders a campaign reuses (created once per process)."""

    _root: Path | None = None

    @classmethod
    def root(cls) -> Path:
        if cls._root is None:
            cls._root = Path(tempfile.mkdtemp(prefix="memd-fuzz-"))
            memory = cls._root / "claude" / "projects" / "-w" / "memory"
            (memory / "team").mkdir(parents=True)
            (memory / "MEMORY.md").write_text("- [A](a.md) — a\n")
            (memory / "a.md").write_text("---\nname: A\ndescription: a\ntype: user\n---\nline one\n")
            (cls._root / "state").mkdir()
        return cls._root


def t_transcript(data: bytes) -> None:
    from memd.transcripts import records, render
    from memd.transcripts.reader import read_all

    path = _Dirs.root() / "session.jsonl"
    path.write_bytes(data)
    items, _ = read_all(path)
    recs = records.parse(items)
    render.render_pieces(recs)


def t_memtool(tool_input: Any) -> None:
    import shutil

    from memd.llm.memtool import Limits, StagedMemory

    root = _Dirs.root() / "stage"
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(_Dirs.root() / "claude" / "projects" / "-w" / "memory", root)
    out, err = StagedMemory(root, Limits(max_file_bytes=100_000, max_run_bytes=1_000_000)).handle(tool_input)
    assert isinstance(out, str) and isinstance(err, bool)


class _Stdin:
    def __init__(self, data: bytes) -> None:
        self.buffer = io.BytesIO(data)

    def isatty(self) -> bool:
        return False


def t_hook(raw: bytes) -> None:
    import os

    from memd.hooks.entry import main

    claude = str(_Dirs.root() / "claude")
    raw = raw.replace(b"{claude}", claude.encode())
    old = sys.stdin, sys.stdout, os.environ.get("XDG_STATE_HOME")
    out = io.StringIO()
    os.environ["XDG_STATE_HOME"] = str(_Dirs.root() / "state")
    sys.stdin, sys.stdout = _Stdin(raw), out  # type: ignore[assignment]
    try:
        rc = main(["--claude-dir", claude])
    finally:
        sys.stdin, sys.stdout = old[0], old[1]
        if old[2] is None:
            os.environ.pop("XDG_STATE_HOME", None)
        else:
            os.environ["XDG_STATE_HOME"] = old[2]
    assert rc == 0
    if out.getvalue():
        json.loads(out.getvalue())  # an answer is one JSON object


FUNCS: dict[str, Callable[[Any], None]] = {"frontmatter": t_frontmatter, "index": t_index, "lint": t_lint,
                                           "secrets": t_secrets, "transcript": t_transcript, "memtool": t_memtool,
                                           "hook": t_hook}


def strategy(name: str, max_repeat: int = 2000) -> st.SearchStrategy[Any]:
    """The inputs of target ``name``; ``max_repeat`` bounds how often a text's middle repeats."""
    return {"frontmatter": texts(max_repeat), "index": texts(max_repeat),
            "lint": st.tuples(texts(max_repeat), texts(max_repeat)), "secrets": texts(max_repeat),
            "transcript": transcript_lines(), "memtool": memtool_inputs(), "hook": hook_events()}[name]


def _text_of(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, tuple):
        return "".join(map(_text_of, value))
    return json.dumps(value, default=str)


def run(name: str, value: Any) -> float:
    """Seconds target ``name`` took on value; AssertionError when past its deadline."""
    fn = FUNCS[name]
    text = _text_of(value)
    deadline = FLOOR + RATIO * ra.plain_scan(text)
    took = ra.timed(lambda: fn(value), deadline)
    assert took is not None, f"{name}: past {deadline:.2f} s on an input of {len(text)} characters"
    return took
