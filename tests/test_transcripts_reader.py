"""The transcript reader: every line once, exactly, whatever the file does."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memd.layout import session_files, subagent_files
from memd.transcripts.reader import LineReader, identity, is_active, read_all
from memd.transcripts.sessions import session_id_for
from tests.plugins.transcripts import assistant, lines, user

JOINED = "-Users-soph-Work-entire-devenv-cli/130d7b7e-5801-4345-9bd6-f32fd9b8429b.jsonl"


def _all_transcripts(claude: Path) -> list[Path]:
    out: list[Path] = []
    for d in sorted((claude / "projects").iterdir()):
        out += session_files(d) + subagent_files(d)
    return out


def test_every_real_session_is_read_to_its_last_newline(claude_data: Path) -> None:
    files = _all_transcripts(claude_data)
    assert len(files) >= 20
    assert any(f.parent.name == "subagents" for f in files)
    total = 0
    for f in files:
        data = f.read_bytes()
        recs, r = read_all(f)
        assert r.end_offset == data.rfind(b"\n") + 1, f
        assert r.pending_bytes == len(data) - r.end_offset
        assert not r.replaced and not r.missing and r.error is None
        # every complete line that parses as an object is a record, in order, with its offset
        if f.name != Path(JOINED).name:
            expected = [json.loads(x) for x in data[: r.end_offset].split(b"\n") if x.strip()]
            objs = [o for o in expected if isinstance(o, dict)]
            assert [o for _, o in recs] == objs
            for off, obj in recs:
                assert json.loads(data[off: data.index(b"\n", off)]) == obj
        total += len(recs)
    assert total > 5000


def test_joined_records_are_recovered(claude_data: Path) -> None:
    f = claude_data / "projects" / JOINED
    data = f.read_bytes()
    recs, r = read_all(f)
    complete = data[: data.rfind(b"\n")].split(b"\n")
    assert r.bad_lines == 0
    assert len(recs) == len(complete) + 1  # one line holds two records
    joined = [o for _, o in recs if o.get("type") == "summary"]
    assert joined and joined[0]["summary"] == "Add agent name to logging context automatically"
    offs = [off for off, _ in recs]
    assert len(set(offs)) == len(offs) - 1  # both records report the offset of their line


def test_malformed_lines_are_counted_not_raised(claude_data: Path, caplog: pytest.LogCaptureFixture) -> None:
    f = claude_data / "projects" / "-tmp" / "edge_cases.jsonl"
    with caplog.at_level("WARNING", logger="memd.transcripts"):
        recs, r = read_all(f)
    assert r.bad_lines == 3  # "massive error", 42, [1]: JSON, but not records
    assert len(recs) == 15
    msgs = [m.getMessage() for m in caplog.records]
    assert sum("bad line at offset" in m and str(f) in m for m in msgs) == 3
    assert not any("massive error" in m for m in msgs)  # positions are logged, never the content


def test_torn_last_line_waits_and_is_read_once(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    a, b = lines([user("one")]), lines([user("two")])
    p.write_bytes(a + b[:25])
    recs, r = read_all(p)
    assert [o["message"]["content"] for _, o in recs] == ["one"]
    assert r.end_offset == len(a) and r.pending_bytes == 25
    with open(p, "ab") as f:
        f.write(b[25:])
    recs2, r2 = read_all(p, r.end_offset)
    assert [o["message"]["content"] for _, o in recs2] == ["two"]
    assert r2.end_offset == len(a) + len(b)
    recs3, r3 = read_all(p, r2.end_offset)
    assert recs3 == [] and r3.end_offset == r2.end_offset


def test_joined_and_torn_lines(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    one, two, three = (json.dumps(user(t)) for t in ("one", "two", "three"))
    torn = one[:40]
    p.write_text(f"{one}{two}\n{torn}{three}\n{{not json\n\n  \r\n{one}\r\n", encoding="utf-8")
    recs, r = read_all(p)
    assert [o["message"]["content"] for _, o in recs] == ["one", "two", "three", "one"]
    assert r.bad_lines == 2  # the torn record before "three", and "{not json"


def test_inner_objects_of_a_torn_record_are_not_taken_for_records(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    rec = json.dumps(assistant("hello", {"type": "tool_use", "id": "t", "name": "Bash", "input": {"c": 1}}))
    cut = rec.index('"input"') + 20  # torn inside the content list
    p.write_text(rec[:cut] + "\n", encoding="utf-8")
    recs, r = read_all(p)
    assert recs == [] and r.bad_lines == 1


def test_invalid_utf8_is_recovered_with_replacement(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    p.write_bytes(b'{"type":"user","message":{"content":"caf\xe9"}}\n')
    recs, r = read_all(p)
    assert recs[0][1]["message"]["content"] == "caf\ufffd" and r.bad_lines == 0


def test_truncated_or_replaced_file_starts_over(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    p.write_bytes(lines([user("a"), user("b")]))
    _, r = read_all(p)
    ino = r.inode
    p.write_bytes(lines([user("c")]))  # truncated in place: shorter than the offset
    recs, r2 = read_all(p, r.end_offset, expect_inode=ino)
    assert r2.replaced and r2.start == 0 and [o["message"]["content"] for _, o in recs] == ["c"]
    q = tmp_path / "new.jsonl"
    q.write_bytes(lines([user("x"), user("y"), user("z"), user("w")]))
    os.replace(q, p)  # replaced by another file, longer than the offset
    recs, r3 = read_all(p, r2.end_offset, expect_inode=ino)
    assert identity(p) is not None and r3.inode != ino
    assert r3.replaced and [o["message"]["content"] for _, o in recs] == ["x", "y", "z", "w"]


def test_missing_and_deleted_mid_read(tmp_path: Path) -> None:
    _, r = read_all(tmp_path / "nope.jsonl", 10)
    assert r.missing and r.end_offset == 10
    p = tmp_path / "s.jsonl"
    p.write_bytes(lines([user(str(i)) for i in range(3000)]))
    reader = LineReader(p, chunk_bytes=4096)
    it = iter(reader)
    next(it)
    p.unlink()  # deleted while reading: the open file is still read to its end
    rest = list(it)
    assert len(rest) == 2999 and reader.end_offset > 0 and not reader.missing


def test_huge_line_is_skipped_with_bounded_memory(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    with open(p, "wb") as f:
        f.write(lines([user("before")]))
        f.write(b'{"type":"user","message":{"content":"')
        block = b"x" * (1 << 20)
        for _ in range(20):
            f.write(block)
        f.write(b'"}}\n')
        f.write(lines([user("after")]))
    size = p.stat().st_size
    assert size > 20 * (1 << 20)
    tracemalloc.start()
    try:
        reader = LineReader(p, max_line_bytes=1 << 20, chunk_bytes=256 * 1024)
        got = [o["message"]["content"] for _, o in reader]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got == ["before", "after"]
    assert reader.oversize_lines == 1 and reader.bad_lines == 1 and reader.end_offset == size
    assert peak < 4 * (1 << 20), peak  # about one chunk plus max_line_bytes, never the line


def test_huge_unfinished_line_keeps_offset(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    head = lines([user("before")])
    p.write_bytes(head + b"y" * (3 << 20))  # an oversize line still being written
    _, r = read_all(p, max_line_bytes=1 << 20, chunk_bytes=1 << 18)
    assert r.end_offset == len(head) and r.oversize_lines == 0
    with open(p, "ab") as f:
        f.write(b"\n" + lines([user("after")]))
    recs, r2 = read_all(p, r.end_offset, max_line_bytes=1 << 20, chunk_bytes=1 << 18)
    assert [o["message"]["content"] for _, o in recs] == ["after"] and r2.oversize_lines == 1


def test_max_bytes_reads_a_span_in_pieces(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    p.write_bytes(lines([user(str(i)) for i in range(50)]))
    got: list[str] = []
    off = 0
    while True:
        recs, r = read_all(p, off, max_bytes=500)
        if not recs:
            break
        got += [o["message"]["content"] for _, o in recs]
        off = r.end_offset
    assert got == [str(i) for i in range(50)] and off == p.stat().st_size


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12),
       chunk=st.sampled_from([7, 64, 1000, 1 << 20]))
def test_any_split_into_appends_reads_like_the_whole(tmp_path_factory: pytest.TempPathFactory,
                                                     cuts: list[int], chunk: int) -> None:
    body = lines([user("ü" * (i % 7), ts=None) if i % 3 else assistant(f"a{i}") for i in range(40)]
                 + ["{broken", json.dumps(user("j1")) + json.dumps(user("j2"))])
    body += json.dumps(user("last")).encode() + b"\n"
    whole, _ = read_all(_write(tmp_path_factory, body), chunk_bytes=chunk)
    p = _write(tmp_path_factory, b"")
    points = sorted({min(c, len(body)) for c in cuts} | {len(body)})
    got: list[tuple[int, dict[str, object]]] = []
    off, prev = 0, 0
    for point in points:
        with open(p, "ab") as f:
            f.write(body[prev:point])
        prev = point
        recs, r = read_all(p, off, chunk_bytes=chunk)
        got += recs
        off = r.end_offset
    assert got == whole
    assert off == len(body)


def _write(factory: pytest.TempPathFactory, data: bytes) -> Path:
    p = factory.mktemp("prop") / "s.jsonl"
    p.write_bytes(data)
    return p


def test_is_active(tmp_path: Path) -> None:
    p = tmp_path / "s.jsonl"
    p.write_bytes(b"")
    os.utime(p, (1000.0, 1000.0))
    assert is_active(p, 1000.0 + 14 * 60, 15)
    assert not is_active(p, 1000.0 + 16 * 60, 15)
    assert not is_active(tmp_path / "gone.jsonl", 1000.0, 15)


def test_session_ids(tmp_path: Path) -> None:
    sid = "8463c716-a2ea-4c14-9efa-87158ebd9f20"
    assert session_id_for(tmp_path / f"{sid}.jsonl") == sid
    assert session_id_for(tmp_path / sid / "subagents" / "agent-a7be2f0.jsonl") == sid
    assert session_id_for(tmp_path / "agent-a7be2f0.jsonl", sid) == sid


def test_next_line_start(tmp_path: Path) -> None:
    from memd.transcripts.reader import next_line_start

    p = tmp_path / "s.jsonl"
    p.write_bytes(b"abc\ndef\nghi")
    assert [next_line_start(p, i, chunk_bytes=2) for i in range(12)] == [0, 4, 4, 4, 4, 8, 8, 8, 8, 11, 11, 11]
