"""Topic files: byte-exact round trips, the PyYAML-free fast path, and hostile frontmatter."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memd.core import frontmatter
from tests.conftest import claude_data_source

FLAT = "---\nname: License\ndescription: Always Apache 2.0, never MIT\ntype: user\n---\n\nBody.\n"
NESTED = ("---\nname: Tests\ndescription: Write new tests\nmetadata:\n  type: feedback\n"
          "  originSessionId: 1b3e6441\n---\nBody.\n")


def test_flat_and_nested_shapes() -> None:
    flat, nested = frontmatter.parse(FLAT), frontmatter.parse(NESTED)
    assert (flat.shape, flat.type, flat.name, flat.description) == (
        "flat", "user", "License", "Always Apache 2.0, never MIT")
    assert (nested.shape, nested.type, nested.meta["originSessionId"]) == ("nested", "feedback", "1b3e6441")


def test_crlf_and_no_frontmatter_are_kept() -> None:
    crlf = FLAT.replace("\n", "\r\n")
    tf = frontmatter.parse(crlf)
    assert tf.type == "user" and tf.newline == "\r\n" and frontmatter.render(tf) == crlf
    plain = "# Just notes\n\nno frontmatter here\n"
    tf2 = frontmatter.parse(plain)
    assert not tf2.has_frontmatter and frontmatter.render(tf2) == plain


def test_alias_bomb_is_refused_not_expanded() -> None:
    bomb = "---\na: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n" \
           "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n---\nbody\n"
    tf = frontmatter.parse(bomb)
    assert tf.yaml_error is not None and "anchors are not allowed" in tf.yaml_error
    assert all(isinstance(v, str) for v in tf.data.values())  # read leniently, as text
    with pytest.raises(frontmatter.FrontmatterError):
        frontmatter.load_yaml("a: [1]\nb: *a\n")


@pytest.mark.parametrize("text", [
    "---\nname: [unclosed\n---\nbody\n",
    "---\n\t- tab: indent\n---\n",
    "---\nkey: \"unterminated\n---\n",
    "---\n" + "[" * 5000 + "\n---\n",
    "---\n!!python/object:os.system ls\n---\n",
])
def test_malformed_yaml_never_raises(text: str) -> None:
    tf = frontmatter.parse(text)
    assert tf.error or tf.yaml_error
    assert frontmatter.render(tf) == text


def test_lenient_read_of_colon_values() -> None:
    tf = frontmatter.parse("---\nname: X\ndescription: Cover letters: NYC, 1 page\ntype: feedback\n---\n")
    assert tf.yaml_error and tf.description == "Cover letters: NYC, 1 page" and tf.type == "feedback"


_key = st.sampled_from(["name", "description", "type", "metadata", "node_type", "related", "yes", "x1"])
_value = st.one_of(
    st.text(alphabet="abcXYZ 019-:#&*!'\"[]{},.%@`|>?~<=\\", min_size=0, max_size=12),
    st.sampled_from(["true", "No", "null", "~", "2026-03-05", "1e3", "0x1F", ".inf", "a: b", "x #c", "ok"]),
    st.text(min_size=1, max_size=8),
)
_line = st.one_of(
    st.builds(lambda k, v: f"{k}: {v}", _key, _value),
    st.builds(lambda k, v: f"  {k}: {v}", _key, _value),
    st.builds(lambda k: f"{k}:", _key),
    st.sampled_from(["", "# comment", "   ", "- item", "  - item", "\tname: tab"]),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_line, max_size=8))
def test_fast_path_agrees_with_pyyaml(lines: list[str]) -> None:
    text = "\n".join(lines) + "\n"
    fast = frontmatter.fast_yaml(text)
    if fast is None:
        return
    try:
        slow = frontmatter.load_yaml(text)
    except frontmatter.FrontmatterError:
        pytest.fail(f"fast path accepted what PyYAML rejects: {text!r} -> {fast!r}")
    assert fast == (slow or {}), text


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("---\n\r name:type description abc\ufeff\u2028#")), max_size=80))
def test_render_parse_round_trip(text: str) -> None:
    assert frontmatter.render(frontmatter.parse(text)) == text


def test_every_real_topic_file_parses() -> None:
    src = claude_data_source()
    if src is None:
        pytest.skip("no shared claude-data")
    files = sorted(Path(src).glob("projects/*/memory/*.md"))
    assert len(files) > 60
    for p in files:
        text = p.read_text(encoding="utf-8")
        tf = frontmatter.parse(text)
        assert frontmatter.render(tf) == text
        if p.name != "MEMORY.md":
            assert tf.has_frontmatter and tf.error is None, p
            assert tf.type in frontmatter.MEMORY_TYPES and tf.description, p
