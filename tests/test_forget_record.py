"""The forget record (``memd.core.forgetting``): what travels to the other machines, never the thing itself."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memd.core import forgetting

texts = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40)


@settings(max_examples=200, deadline=None)
@given(secret=texts, before=st.text(max_size=60), after=st.text(max_size=60), machine=st.text(max_size=20))
def test_a_literal_is_found_by_its_hash_and_the_record_never_holds_it(secret: str, before: str, after: str,
                                                                     machine: str) -> None:
    rec = forgetting.literal(secret, id="ab12", salt=os.urandom(16), machine=machine, when="2026-12-02")
    line = rec.line()
    assert "\n" not in line
    if len(secret) >= 4:
        assert secret not in line
    back = forgetting.parse(line.split(": ", 1)[1])
    assert back == rec
    data = (before + secret + after).encode()
    assert forgetting.find_literal(back, [b"", data]) == secret.encode()
    other = (before + after).encode()
    assert (forgetting.find_literal(back, [other]) is not None) == (secret.encode() in other)


def test_every_kind_round_trips_and_a_pattern_travels_as_itself() -> None:
    for rec in (forgetting.pattern(r"hunter\d+ \n x", id="01", machine="lap top"), forgetting.secrets(id="02")):
        recs, bad = forgetting.records_in("summary\n\nmemd-kind: forget\n" + rec.line() + "\n")
        assert recs == [rec] and bad == []
    assert forgetting.pattern("x+", id="1").describe() == "the matches of a pattern"  # the words never hold it


@pytest.mark.parametrize("value, why", [
    ("v2 id=1 kind=secrets", "version"),
    ("v1 kind=secrets", "id"),
    ("v1 id=zz kind=secrets", "id"),
    ("v1 id=1 kind=rm-rf", "kind"),
    ("v1 id=1 kind=literal len=5 salt=00 sha256=abc", "literal"),
    ("v1 id=1 kind=literal len=99999 salt=00 sha256=" + "a" * 64, "literal"),
    ("v1 id=1 kind=pattern pattern=***", "base64"),
    ("v1 id=1 kind=pattern", "pattern"),
    ("v1 id=1 kind=secrets junk", "key=value"),
])
def test_a_record_memd_did_not_write_is_refused_in_words(value: str, why: str) -> None:
    with pytest.raises(forgetting.RecordError, match=why):
        forgetting.parse(value)
    recs, bad = forgetting.records_in(f"x\n\nmemd-forget: {value}\n")
    assert recs == [] and len(bad) == 1


def test_the_map_of_rewritten_commits() -> None:
    a, b, c = "a" * 40, "b" * 40, "c" * 40
    lines = forgetting.map_lines({a: b, c: c})
    assert lines == [f"memd-forget-map: {a} {b}"]
    assert forgetting.map_in("m\n\n" + "\n".join(lines) + "\n") == {a: b}
