"""The linter: codes, severities, secrets, dates, duplicates, recall's file limit, hostile folders."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memd.config import BudgetConfig
from memd.core import fastscan, secret_rules, secrets
from memd.core.fastscan import pattern_needles, solid_length
from memd.core.fastscan import scan as scan_secrets
from memd.core.files import FileRecord, FolderSnapshot
from memd.core.lint import CODES, SEVERITIES, lint
from memd.core.rebuild import NORMALISE
from memd.memfolder.folder import read_folder
from tests.conftest import claude_data_source
from tests.plugins.memory_folders import topic, write_tree

DOCS = Path(__file__).resolve().parents[1] / "docs" / "check.md"


def codes_of(snap: FolderSnapshot, budget: BudgetConfig | None = None) -> list[tuple[str, str, int]]:
    return [(f.code, f.path, f.line) for f in lint(snap, budget)]


def test_codes_table_is_complete_and_documented() -> None:
    assert all(re.fullmatch(r"MEM\d{3}", c) for c in CODES)
    assert all(c.severity in SEVERITIES for c in CODES.values())
    assert len({c.name for c in CODES.values()}) == len(CODES)
    doc = DOCS.read_text(encoding="utf-8")
    for code, c in CODES.items():
        assert code in doc and c.name in doc, f"{code} ({c.name}) is not described in docs/check.md"


def test_secret_findings_name_the_kind_never_the_value() -> None:
    token = "ghp_" + "A1b2C3d4" * 5
    snap = FolderSnapshot.from_texts({
        "MEMORY.md": "- [Deploy](deploy.md) — how to deploy\n",
        "deploy.md": topic("Deploy", "How to deploy", "project", f"Use token {token} for the API.\n"),
    })
    found = [f for f in lint(snap) if f.code == "MEM050"]
    assert [(f.path, f.line, f.severity) for f in found] == [("deploy.md", 7, "error")]
    assert "GitHub token" in found[0].message and token not in found[0].message and "A1b2" not in found[0].message


def test_team_files_get_strict_secret_rules() -> None:
    snap = FolderSnapshot.from_texts({
        "MEMORY.md": "- [Mine](mine.md)\n",
        "mine.md": topic("Mine", "mine", "user", "Mail me at jo@corp-internal.io\n"),
        "team/MEMORY.md": "- [Ops](ops.md)\n",
        "team/ops.md": topic("Ops", "ops", "reference", "Mail ops at ops@corp-internal.io\n"),
    })
    assert [(c, p) for c, p, _ in codes_of(snap) if c == "MEM050"] == [("MEM050", "team/ops.md")]


SAMPLES = [
    "AKIA" + "ABCDEFGHIJKLMNOP", "sk-ant-api03-" + "x" * 30, "ghp_" + "a" * 36, "xoxb-1234567890-abcdef",
    "https://user:hunter22@example.com/x", "-----BEGIN RSA PRIVATE KEY-----", "API_KEY=" + "s3cr3tvalue99",
    'password = "Xy7pQ2wZ9r"', "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.abcdefghijklmno", "AIza" + "B" * 35,
    "sk_live_" + "c" * 24, "glpat-" + "d" * 20, "npm_" + "e" * 36, "hf_" + "f" * 34,
]


def test_fast_secret_scan_agrees_with_secrets_scan_on_samples() -> None:
    filler = "Plain words, a task at risk, gh and gl and SK here; see https://example.com today.\n"
    for s in SAMPLES:
        for text in (s, f"{filler}{s}\n{filler}", s.upper(), s.lower(), f"x{s}x"):
            for strict in (False, True):
                assert scan_secrets(text, strict=strict) == secrets.scan_all(text, strict=strict), text
    src = claude_data_source()
    if src is not None:
        for p in sorted(Path(src).glob("projects/*/memory/*.md")):
            text = p.read_text(encoding="utf-8")
            assert scan_secrets(text, strict=True) == secrets.scan_all(text, strict=True)


def test_secrets_scan_agrees_with_the_reference_on_the_corpus() -> None:
    from tests.test_secrets import BENIGN, CORPUS

    texts = [t for _, t in CORPUS] + BENIGN
    texts.append("\n\n".join(texts))  # all together: every rule's needles present at once
    for text in texts:
        for strict in (False, True):
            assert secrets.scan(text, strict=strict) == secrets.scan_all(text, strict=strict), text


@st.composite
def _rule_text(draw: st.DrawFn) -> str:
    rules = secret_rules.rules(strict=True)
    _, rx = draw(st.sampled_from(rules))
    try:
        hit = draw(st.from_regex(rx, fullmatch=True))
    except Exception:  # a construct hypothesis cannot generate from
        hit = draw(st.sampled_from(SAMPLES))
    pad = st.text(alphabet=st.characters(codec="utf-8"), max_size=20)
    return draw(pad) + hit + draw(pad)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(_rule_text(), st.booleans())
def test_fast_secret_scan_agrees_with_secrets_scan(text: str, strict: bool) -> None:
    assert scan_secrets(text, strict=strict) == secrets.scan_all(text, strict=strict)


def _lint_texts() -> list[str]:
    from tests.secret_corpus import CORPUS as EVASIONS
    from tests.test_secrets import BENIGN, CORPUS

    texts = [c.text for c in EVASIONS] + [t for _, t in CORPUS] + BENIGN
    src = claude_data_source()
    if src is not None:
        texts += [p.read_text(encoding="utf-8") for p in sorted(Path(src).glob("projects/*/memory/**/*.md"))]
    return texts


def test_lint_scan_many_is_scan_on_every_corpus_text() -> None:
    """check's scan (the views only where ``needs_views`` says they may find something, a folder's
    texts looked at together first) finds exactly what the hook's scan finds: each text alone, and
    each beside clean prose in one folder."""
    prose = ("---\nname: Deploy notes\ndescription: how we ship\ntype: project\n---\n\nWe ship on "
             "Fridays with Claude Code; Python 3.11 is the floor.\n")
    for strict in (False, True):
        for text in _lint_texts():
            want = scan_secrets(text, strict=strict)
            assert fastscan.scan_many([text], strict=strict) == [want], text
            assert fastscan.scan_many([prose, text, prose], strict=strict) == [[], want, []], text


_PIECES = ["AKIA", "IOSF", "ODNN7", "EXAMPLE", "ghp_", "A1b2", "C3d4", "sk-", "ant", "api03", "xoxb-", "12345",
           "abcdef", "------", "=====", "Zm9v", "YmFy", "the", "word", "Kalo", "mi.", "tail", "ABCDEF", "x9Yz",
           "password", "token", "key", "api", "\u200b", "\uff53", "\u2014", "é", "…"]


@st.composite
def _pieced_text(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=12))
    seps = draw(st.lists(st.sampled_from(["", " ", "\t", "  ", "\n", ". ", ":", "="]), min_size=len(parts),
                         max_size=len(parts)))
    return "".join(p + s for p, s in zip(parts, seps, strict=True))


@st.composite
def _split_secret(draw: st.DrawFn) -> str:
    """A secret's shape cut into pieces of 3 to 8 characters, one space or tab apart (a split token)."""
    secret = draw(st.sampled_from([*SAMPLES, "AKIAIOSFODNN7EXAMPLE", "xoxb-" + "1a2B" * 6, "------" + "AB12CD34EF"]))
    cuts, at = [], 0
    while at < len(secret):
        n = draw(st.integers(3, 8))
        cuts.append(secret[at:at + n])
        at += n
    seps = draw(st.lists(st.sampled_from([" ", "\t"]), min_size=len(cuts), max_size=len(cuts)))
    return draw(st.sampled_from(["", "see ", "Kalo "])) + "".join(c + s for c, s in zip(cuts, seps, strict=True))


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.one_of(_pieced_text(), _split_secret()), st.booleans())
def test_no_view_finds_anything_where_needs_views_says_no(text: str, strict: bool) -> None:
    """The gate's promise, tested on text made of token pieces, blanks and disguises: when it says
    no, ``secret_views.find`` gives the rules' spans alone."""
    from memd.core import secret_views

    def rules(t: str) -> list[secret_rules.Span]:
        return fastscan.rule_spans(t, strict=strict)

    if not fastscan.needs_views(text):
        assert secret_views.find(text, rules) == secret_views.merge([rules(text)] if rules(text) else []), text
    assert fastscan.scan_many([text, "plain words here"], strict=strict) == [scan_secrets(text, strict=strict), []]


def test_needs_views_lets_ordinary_memory_through() -> None:
    """The point of the gate: ordinary memory text (prose, links, dates, versions, names) skips the
    views; disguises do not."""
    ordinary = ("---\nname: Feedback on reviews\ndescription: keep reviews short — one point each\n"
                "type: feedback\n---\n\nKeep each review comment to one point. **Why:** Maria said so on "
                "2026-03-04 in the Claude Code retro. **How to apply:** see [the guide](guide.md) and "
                "https://example.com/docs/reviews for Python 3.11 projects.\n")
    assert not fastscan.needs_views(ordinary)
    for disguised in ("AKIAIOSF ODNN7EXAMPLE", "the db password is Xk9#mP2$vL", "\uff53\uff4b-ant",
                      "zero\u200bwidth", "Zm9vYmFyYmF6cXV4cXV1eA=="):
        assert fastscan.needs_views(disguised), disguised


@pytest.mark.parametrize(("kind", "rx"), secret_rules.rules(strict=True), ids=lambda x: str(x)[:30])
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_match_of_a_rule_holds_its_needles(kind: str, rx: re.Pattern[str], data: st.DataObject) -> None:
    needles = pattern_needles(rx.pattern, rx.flags) or ()
    try:
        text = data.draw(st.from_regex(rx, fullmatch=True))
    except Exception:
        return
    m = rx.search(text)
    if m is None:  # hypothesis cannot honour every lookaround
        return
    hay = m.group(0).casefold() if rx.flags & re.IGNORECASE else m.group(0)
    for alternatives in needles:
        assert any(n in hay for n in alternatives), (kind, needles, text)
    assert max(map(len, m.group(0).split()), default=0) >= solid_length(rx.pattern, rx.flags), (kind, text)


@pytest.mark.parametrize(("pattern", "expected"), [
    (r"\b[MN][A-Za-z\d]{23,25}\.[\w-]{6}\.[\w-]{27,38}\b", 59), (r"ab\s+cd", 2), (r"[^\s@]{3,}@x", 5),
    (r"[ -~]{30}", 0), (r"[^@]{30}", 0), (r"a(?:bc)d{5}", 5), (r"x.{40}", 1), (r"ab|cd{30}", 0), (r"\x41{20}", 0),
    (r"q{3,}?r", 4),
])
def test_solid_length_shapes(pattern: str, expected: int) -> None:
    assert solid_length(pattern) == expected


@pytest.mark.parametrize(("pattern", "expected"), [
    (r"\bghp_[A-Za-z0-9]{36}", [{"ghp_"}]),
    (r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,}", [{"sk_live_", "sk_test_", "rk_live_", "rk_test_"}]),
    (r"\bsk-(?:proj-|admin-)?[a-z]{20}T3BlbkFJ", [{"T3BlbkFJ"}, {"sk-"}]),
    (r"a?b", None), (r"(?x) abc", None), (r"\d+|xyz", None), (r"abc|xyz", [{"abc", "xyz"}]),
    (r"ab{2}cd", [{"cd"}]), (r"(?:ab)?cd", [{"cd"}]), (r"[abc]de\.fg", [{"de.fg"}]), (r"ab\x41cd", None),
    (r"(?:xy\u00e9|zz)w", [{"xy", "zz"}]),
])
def test_pattern_needles_shapes(pattern: str, expected: list[set[str]] | None) -> None:
    flags = re.compile(pattern).flags
    got = pattern_needles(pattern, flags)
    assert (None if got is None else [set(s) for s in got]) == expected


def test_relative_dates_english_chinese_code_spans_and_anchors() -> None:
    body = ("Shipped yesterday.\nShipped yesterday (2026-03-04).\nRun `date -d tomorrow`.\n```\ntoday\n```\n"
            "上周发布。\n2026年3月5日 今天开会。\nDue next Friday.\n")
    snap = FolderSnapshot.from_texts({"MEMORY.md": "- [N](notes.md)\n- [D](project_x_2026-03-01.md)\n",
                                      "notes.md": topic("Notes", "notes", "project", body),
                                      "project_x_2026-03-01.md": topic("X", "x", "project", "Done today.\n")})
    got = [(c, p, n) for c, p, n in codes_of(snap) if c.startswith("MEM04")]
    assert got == [("MEM040", "notes.md", 7), ("MEM040", "notes.md", 13), ("MEM040", "notes.md", 15),
                   ("MEM041", "project_x_2026-03-01.md", 7)]


def test_relative_date_message_suggests_the_files_own_date_or_today() -> None:
    import time

    texts = {"MEMORY.md": "- [A](a.md)\n- [B](b.md)\n", "a.md": topic("A", "a", "project", "Ship it tomorrow.\n"),
             "b.md": topic("B", "b", "project", "Ship it tomorrow.\n")}
    dated = time.mktime((2025, 7, 14, 12, 0, 0, 0, 0, -1))  # local noon, whatever the zone
    before = time.strftime("%Y-%m-%d")
    found = {f.path: f.message for f in lint(FolderSnapshot.from_texts(texts, mtimes={"a.md": dated}),
                                             today=time.strftime("%Y-%m-%d"))
             if f.code == "MEM040"}
    after = time.strftime("%Y-%m-%d")
    assert found["a.md"].endswith("(write e.g. 2025-07-14, the day the file last changed)"), found
    assert found["b.md"].endswith((f"(write e.g. {before}, today)", f"(write e.g. {after}, today)")), found
    assert all("2026-03-05" not in m for m in found.values())


def test_read_folder_without_signatures_reads_the_same() -> None:
    case = Path(__file__).parent / "golden" / "lint"
    for folder in sorted(case.glob("*/memory")):
        signed = read_folder(folder, BudgetConfig())
        plain = read_folder(folder, BudgetConfig(), signatures=False)
        assert plain == signed, folder  # records compare without their signature
        assert all(f.signature is None for f in plain.files)
        assert any(f.signature is not None for f in signed.files)
        assert lint(plain) == lint(signed)


def test_too_many_topics_names_the_oldest() -> None:
    texts = {"MEMORY.md": ""}
    mtimes: dict[str, float] = {}
    for i in range(205):
        rel = f"t{i:03d}.md"
        texts[rel] = topic(f"T{i}", f"topic {i}", "project")
        mtimes[rel] = 1_700_000_000 + i  # t000 is the oldest
    b = BudgetConfig()
    found = [(c, p) for c, p, _ in codes_of(FolderSnapshot.from_texts(texts, mtimes=mtimes), b)
             if c in ("MEM030", "MEM031")]
    assert found == [("MEM030", "."), *(("MEM031", f"t{i:03d}.md") for i in range(5))]


def test_near_duplicates_scale_without_all_pairs() -> None:
    # 400 files sharing boilerplate, two of them near-identical: found, and cheaply (bounded postings)
    boiler = "This memory was written by the assistant during a session about the project. "
    texts = {"MEMORY.md": ""}
    for i in range(400):
        texts[f"m{i}.md"] = topic(f"M{i}", f"d{i}", "project",
                                  boiler + " ".join(f"w{i}x{j}" for j in range(30)) + "\n")
    texts["m1.md"] = texts["m0.md"].replace("M0", "M1").replace("d0", "d1").replace("w0x29", "other")
    dup = [(c, p) for c, p, _ in codes_of(FolderSnapshot.from_texts(texts)) if c == "MEM014"]
    assert dup == [("MEM014", "m1.md")]


# --------------------------------------------------------------------------- hostile folders


def test_missing_empty_and_file_folders(tmp_path: Path) -> None:
    assert lint(read_folder(tmp_path / "absent")) == []
    (tmp_path / "empty").mkdir()
    snap = read_folder(tmp_path / "empty")
    assert snap.exists and snap.files == () and lint(snap) == []
    (tmp_path / "file").write_text("x")
    assert codes_of(read_folder(tmp_path / "file")) == [("MEM071", ".", 1)]


def test_bad_files_become_findings(tmp_path: Path) -> None:
    mem = write_tree(tmp_path / "memory", {
        "MEMORY.md": "- [Bin](binary.md)\n- [Big](big.md)\n- [Fifo](fifo.md)\n- [Dir](dir.md)\n"
                     "- [Out](outside.md)\n- [Broken](broken.md)\n- [In](inside.md)\n",
        "binary.md": b"\x89PNG\r\n\x1a\n\x00\xff\xfe",
        "real.md": topic("Real", "a real file", "user"),
        "dir.md/inner.md": topic("Inner", "inside a folder named like a file", "user"),
    })
    with open(mem / "big.md", "wb") as f:  # 50 MB, sparse: never read
        f.truncate(50 * 1024 * 1024)
    os.mkfifo(mem / "fifo.md")
    (tmp_path / "secret.md").write_text("outside")
    os.symlink(tmp_path / "secret.md", mem / "outside.md")
    os.symlink(mem / "nowhere.md", mem / "broken.md")
    os.symlink("real.md", mem / "inside.md")
    snap = read_folder(mem, BudgetConfig())
    by = {f.rel: f for f in snap.files}
    assert by["inside.md"].text == (mem / "real.md").read_text() and by["inside.md"].symlink == "real.md"
    assert by["outside.md"].leaves_folder and by["outside.md"].text is None
    got = {(f.code, f.path) for f in lint(snap)}
    assert {("MEM060", "binary.md"), ("MEM061", "big.md"), ("MEM062", "fifo.md"), ("MEM008", "outside.md"),
            ("MEM062", "broken.md")} <= got
    # dir.md is a folder holding files, so its link is not dangling; nothing else dangles either
    assert [f for f in lint(snap) if f.code == "MEM005"] == []


def test_unreadable_file_when_not_root(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads files whatever their mode (the FIFO case covers unreadable files)")
    mem = write_tree(tmp_path / "memory", {"MEMORY.md": "", "locked.md": topic("L", "l", "user")})
    (mem / "locked.md").chmod(0)
    try:
        assert ("MEM062", "locked.md", 1) in codes_of(read_folder(mem))
    finally:
        (mem / "locked.md").chmod(0o644)


def test_record_helpers() -> None:
    r = FileRecord("team/x.md", "text")
    assert r.team and not r.is_index and FileRecord("team/MEMORY.md").is_index and not FileRecord("x.md").team


_junk = st.one_of(
    st.text(max_size=300),
    st.sampled_from(["---\n", "---\nname: x\n---\n", "```\n", "<!--\n", "-->\n", "- [a](b.md) — c\n",
                     "- [](<>)\n", "## User\n", "\r\n", "\ufeff---\n", "- [x](../../etc.md)\n", "[[wiki]]\n"]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.dictionaries(st.sampled_from(["MEMORY.md", "a.md", "b.md", "team/MEMORY.md", "team/t.md", "d/e.md"]),
                       st.lists(_junk, max_size=12).map("".join), max_size=6))
def test_lint_and_rebuild_never_raise(texts: dict[str, str]) -> None:
    from memd.core.rebuild import plan_rebuild, topics_of

    snap = FolderSnapshot.from_texts(texts)
    for f in lint(snap):
        assert f.code in CODES and f.line >= 1 and f.severity == CODES[f.code].severity
    plan = plan_rebuild(texts.get("MEMORY.md"), topics_of(snap), mode=NORMALISE)
    assert plan_rebuild(plan.text, topics_of(snap), mode=NORMALISE).text == plan.text
