"""Secret detection for memory text. Stdlib only (the PreToolUse hook runs it on every memory write).

A hit names the kind of secret and where it is, never the secret itself. ``strict`` adds the
rules for team memory, which is shared with other people: personal data such as e-mail
addresses and phone numbers.

The rules aim at shapes, not guesses: a provider's fixed prefix and length where there is one
(119 providers in tests/secret_corpus.py), and for assignments only what cannot be prose: an
UPPER_CASE .env/shell/compose variable named like a secret with a real value, a ``db_password: ...``
whose one value ends its line, or a ``password: ...`` whose value looks machine-made (letters and
digits, no spaces), so that "password: ask the admin" stays allowed. Placeholders (``${VAR}``, ``<your key>``, ``***``,
``changeme``) never count. The rules themselves live in ``memd.core.secret_rules`` (pattern
strings compiled on first use), read by both scanners: ``scan_all`` here runs every rule (the
reference), ``memd.core.fastscan`` only those a text can match (what ``scan`` uses).

A secret written to get past a pattern is caught too (``memd.core.secret_views``): the rules run
over the text normalised (NFKC: fullwidth letters; zero-width and other format characters removed),
over a key split by a space, spaced one character at a time or split over two lines, inside base64
that decodes to text; and detectors find a random-looking
value next to the word that names it ("the database password is ..."), a bare AWS secret key and a
private key's body without its BEGIN line. ``spans`` is the one answer: ``scan`` (the hooks, the
memory tool) and ``redact`` (logs, and ``[REDACTED:<kind>]`` in what is sent) read it.
"""

from __future__ import annotations

from memd.core.secret_rules import SecretHit, Span, collect_spans, hits_of, rules

__all__ = ["SecretHit", "redact", "scan", "scan_all", "spans"]


def spans(text: str, *, strict: bool = False, pii: bool = True) -> list[Span]:
    """Every secret of text as (kind, start, end), sorted, none starting inside another: the rules
    over the text as written and over its normalised view, and the detectors of what a rule cannot
    see (``memd.core.secret_views``: split, fullwidth, zero-width, base64-encoded, bare, a value
    next to its name, a key body without its BEGIN line). ``scan``, ``redact``, the hooks and the
    memory tool all go through here."""
    from memd.core import fastscan  # not at import: the logs' redact callers rarely need it

    return fastscan.spans(text, strict=strict, pii=pii)


def scan(text: str, *, strict: bool = False, pii: bool = True) -> list[SecretHit]:
    """Every secret-looking span of text (and, with strict and pii, personal data) as (kind, line,
    column) of its start: ``spans``. The rules run through ``memd.core.fastscan``: only those a
    text can match (by length and required literals) are compiled and run, so a hook scanning one
    memory write does not compile all 60+ rules."""
    return hits_of(text, spans(text, strict=strict, pii=pii))


def scan_all(text: str, *, strict: bool = False, pii: bool = True) -> list[SecretHit]:
    """``scan`` by its definition: every rule compiled and run (the reference the fast path is
    tested against), with the same views and detectors."""
    from memd.core import secret_views

    ruleset = rules(strict, pii)
    return hits_of(text, secret_views.find(text, lambda t: collect_spans(t, ruleset)))


def redact(text: str, *, marker: str = "[{kind} redacted]", counts: dict[str, int] | None = None) -> str:
    """text with every secret (``spans``) replaced by ``marker`` naming its kind (for logs and
    messages; what is sent to the API uses ``[REDACTED:{kind}]``). ``counts``, when given, gets
    the hits per kind added. Linear in the text: every pattern is (tests/test_regex_linear.py)."""
    found = spans(text)
    if not found:
        return text
    parts: list[str] = []
    at = 0
    for kind, start, end in found:
        parts.append(text[at:start])
        parts.append(marker.format(kind=kind))
        at = end
        if counts is not None:
            counts[kind] = counts.get(kind, 0) + 1
    parts.append(text[at:])
    return "".join(parts)
