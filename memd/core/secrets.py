"""Secret detection for memory text. Stdlib only (the PreToolUse hook runs it on every memory write).

A hit names the kind of secret and where it is, never the secret itself. ``strict`` adds the
rules for team memory, which is shared with other people: personal data such as e-mail
addresses and phone numbers.

The rules aim at shapes, not guesses: a provider's fixed prefix and length where there is one
(60+ shapes, see tests/test_secrets.py), and for assignments only what cannot be prose: an
UPPER_CASE .env/shell variable named like a secret with a real value, or a lower-case
``password: ...`` whose value looks machine-made (letters and digits, no spaces), so that
"password: ask the admin" stays allowed. Placeholders (``${VAR}``, ``<your key>``, ``***``,
``changeme``) never count. The rules themselves live in ``memd.core.secret_rules`` (pattern
strings compiled on first use), read by both scanners: ``scan_all`` here runs every rule (the
reference), ``memd.core.fastscan`` only those a text can match (what ``scan`` uses).
"""

from __future__ import annotations

from memd.core.secret_rules import SecretHit, collect, rules

__all__ = ["SecretHit", "redact", "scan", "scan_all"]


def scan(text: str, *, strict: bool = False, pii: bool = True) -> list[SecretHit]:
    """Every secret-looking span of text (and, with strict and pii, personal data).

    The same hits as ``scan_all``, through ``memd.core.fastscan``: only the rules a text can match
    (by length and required literals) are compiled and run, so a hook scanning one memory write
    does not compile all 60+ rules."""
    from memd.core import fastscan  # not at import: redact's callers (the logs) never need it

    return fastscan.scan(text, strict=strict, pii=pii)


def scan_all(text: str, *, strict: bool = False, pii: bool = True) -> list[SecretHit]:
    """``scan`` by its definition: every rule compiled and run over the whole text (the reference
    the fast path is tested against)."""
    return collect(text, rules(strict, pii))


def redact(text: str, *, marker: str = "[{kind} redacted]", counts: dict[str, int] | None = None) -> str:
    """text with every secret replaced by ``marker`` naming its kind (for logs and messages; what is
    sent to the API uses ``[REDACTED:{kind}]``). ``counts``, when given, gets the hits per kind added.

    Only the rules the text can match run (``memd.core.fastscan``'s selection, as ``scan``), each
    once over the text: running all 60+ rules made a blank-line run pay the netrc rule's scan from
    every line start (quadratic: 56 KB took seconds)."""
    from memd.core import fastscan

    out = text
    for rule in fastscan.active(fastscan.ruleset(), text):
        rep = marker.format(kind=rule.kind)
        if counts is None:
            out = rule.rx.sub(rep, out)
            continue
        out, n = rule.rx.subn(rep, out)
        if n:
            counts[rule.kind] = counts.get(rule.kind, 0) + n
    return out
