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


_GAP = 64  # a whitespace run this long ends what any rule can match (see ``redact``)


def redact(text: str, *, marker: str = "[{kind} redacted]", counts: dict[str, int] | None = None) -> str:
    """text with every secret replaced by ``marker`` naming its kind (for logs and messages; what is
    sent to the API uses ``[REDACTED:{kind}]``). ``counts``, when given, gets the hits per kind added.

    Linear in the text: only the rules the text can match run (``memd.core.fastscan``'s selection,
    as ``scan``), and over the stretches between whitespace runs of ``_GAP`` characters or more, each
    on its own. Run over a whole text, a rule starting ``^\\s*`` (netrc) scanned a run of blank
    lines again from every line start: 56 KB took seconds. No secret holds such a run; a key and its
    value ``_GAP`` blank characters apart are not taken for one."""
    import re

    from memd.core import fastscan

    active = [(rule.rx, marker.format(kind=rule.kind), rule.kind)
              for rule in fastscan.active(fastscan.ruleset(), text)]
    if not active:
        return text
    parts = re.split(rf"(\s{{{_GAP},}})", text) if len(text) > _GAP else [text]
    for i in range(0, len(parts), 2):  # the odd parts are the long whitespace runs
        part = parts[i]
        for rx, rep, kind in active:
            if counts is None:
                part = rx.sub(rep, part)
                continue
            part, n = rx.subn(rep, part)
            if n:
                counts[kind] = counts.get(kind, 0) + n
        parts[i] = part
    return "".join(parts)
