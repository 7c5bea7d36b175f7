"""The secrets corpus: 100+ shapes a secret takes in memory, each with the evasions an attacker (or a
careless model) uses to get one past a pattern. Shared by tests/test_secret_corpus.py and
bench/fuzz.py.

Every value is built at run time from pieces and seeded random characters of the right alphabet,
so this file holds no literal a secret scanner would flag (``git grep -nIE "(sk-ant-[A-Za-z0-9_-]{20,})"``
stays empty), yet each has the exact shape of the real thing.

``CORPUS`` is a list of ``Case(name, kind, text, secret)``: ``kind`` is a part of the kind every
scanner must report (the transformed cases keep their base's kind, base64 adds "base64"), ``secret``
the stretch that must not survive redaction.
"""

from __future__ import annotations

import base64
import random
import string

from memd.record import Record
from tests.test_secrets import BENIGN
from tests.test_secrets import CORPUS as SHAPES

_rng = random.Random(20261201)
UP, LOW, DIG = string.ascii_uppercase, string.ascii_lowercase, string.digits
ALNUM = UP + LOW + DIG
B64 = ALNUM + "+/"


class Case(Record):
    name: str
    kind: str  # a part of the kind reported
    text: str  # as it would be written into memory
    secret: str  # what must not survive redaction


def r(alphabet: str, n: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def fullwidth(s: str) -> str:
    """ASCII letters, digits and punctuation as their fullwidth forms (U+FF01-U+FF5E)."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in s)


def zero_width(s: str, ch: str = "\u200b") -> str:
    """A zero-width character after every fourth character."""
    return ch.join(s[i:i + 4] for i in range(0, len(s), 4))


def split(s: str, at: int | None = None, sep: str = " ") -> str:
    at = len(s) // 2 if at is None else at
    return s[:at] + sep + s[at:]


def b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


def _der(head: bytes, n: int) -> bytes:
    return head + bytes(_rng.randrange(256) for _ in range(n))


def pem_body(der: bytes) -> str:
    text = base64.b64encode(der).decode()
    return "\n".join(text[i:i + 64] for i in range(0, len(text), 64))


# bare keys of distinctive providers, each disguised every way below
def _keys() -> list[tuple[str, str]]:
    return [
        ("AWS access key", "AKIA" + r(UP + "234567", 16)),
        ("GitHub token", "gh" + "p_" + r(ALNUM, 36)),
        ("Anthropic API key", "sk-" + "ant-api03-" + r(ALNUM + "_-", 93) + "AA"),
        ("OpenAI API key", "sk-" + "proj-" + r(ALNUM, 74) + "T3Blbk" + "FJ" + r(ALNUM, 74)),
        ("Slack token", "xo" + "xb-" + r(DIG, 12) + "-" + r(DIG, 13) + "-" + r(ALNUM, 24)),
        ("Stripe key", "sk" + "_live_" + r(ALNUM, 24)),
        ("GitLab token", "gl" + "pat-" + r(ALNUM, 20)),
        ("npm token", "np" + "m_" + r(ALNUM, 36)),
        ("Google API key", "AI" + "za" + r(ALNUM + "_-", 35)),
        ("Hugging Face token", "h" + "f_" + r(ALNUM, 34)),
    ]


def _cases() -> list[Case]:
    out = [Case(f"shape {i:02d}", kind, text, max(text.split(), key=len)[-16:])
           for i, (kind, text) in enumerate(SHAPES)]
    for kind, key in _keys():
        out += [
            Case(f"{kind}: fullwidth", kind, f"the key is {fullwidth(key)} (prod)", fullwidth(key)[6:]),
            Case(f"{kind}: zero-width space inside", kind, f"key {zero_width(key)} here", zero_width(key)[6:]),
            Case(f"{kind}: zero-width joiner inside", kind, f"key {zero_width(key, chr(0x200d))}",
                 zero_width(key, chr(0x200d))[6:]),
            Case(f"{kind}: soft hyphen inside", kind, f"key {zero_width(key, chr(0xad))}",
                 zero_width(key, chr(0xad))[6:]),
            Case(f"{kind}: split by a space", kind, f"creds {split(key)} ok", split(key)[-8:]),
            Case(f"{kind}: base64-encoded", "base64", f"blob {b64('key=' + key)}", b64("key=" + key)[8:]),
        ]
    aws_id = "AKIA" + r(UP + "234567", 16)
    aws_secret = r(ALNUM, 14) + "/" + r(ALNUM, 12) + "+" + r(ALNUM, 12)
    out += [
        Case("AWS access key: lower case", "AWS access key", f"aws id {aws_id.lower()}", aws_id.lower()),
        Case("AWS access key: mixed case", "AWS access key", f"id={aws_id[:4].lower()}{aws_id[4:]}", aws_id[4:]),
        Case("AWS access key: tab inside", "AWS access key", f"id {split(aws_id, 12, chr(9))}", aws_id[12:]),
        Case("AWS access key: non-breaking space inside", "AWS access key", f"id {split(aws_id, 8, chr(0xa0))}",
             aws_id[8:]),
        Case("AWS access key: ideographic space inside", "AWS access key", f"id {split(aws_id, 8, chr(0x3000))}",
             aws_id[8:]),
        Case("AWS secret key: bare", "AWS secret key", f"prod s3: {aws_secret}", aws_secret),
        Case("AWS secret key: bare, own line", "AWS secret key", f"keys:\n{aws_id}\n{aws_secret}\n", aws_secret),
        Case("AWS secret key: bare in backticks", "AWS secret key", f"use `{aws_secret}` for the bucket", aws_secret),
        Case("AWS key pair: base64-encoded", "base64",
             "backup " + b64(f"[default]\naws_access_key_id = {aws_id}\naws_secret_access_key = {aws_secret}\n"),
             b64(f"[default]\naws_access_key_id = {aws_id}")[:40]),
        Case("AWS key pair: base64 twice", "base64", "x " + b64(b64(f"aws_access_key_id={aws_id}")),
             b64(b64(f"aws_access_key_id={aws_id}"))[:40]),
        Case("AWS key pair: urlsafe base64", "base64",
             "t " + base64.urlsafe_b64encode(f"id {aws_id} secret".encode()).decode().rstrip("="),
             base64.urlsafe_b64encode(f"id {aws_id} secret".encode()).decode()[:30]),
    ]
    pw = r(LOW, 4) + r(DIG, 2) + "#" + r(UP, 2) + r(LOW, 3) + "!" + r(DIG, 2)
    hexkey = r("0123456789abcdef", 32)
    out += [
        Case("password in prose: is", "secret next to its name", f"the database password is {pw}", pw),
        Case("password in prose: was", "secret next to its name", f"Prod DB password was {pw} until May", pw),
        Case("password in prose: for", "secret next to its name", f"password for the staging db is {pw}", pw),
        Case("password in prose: colon", "secret next to its name", f"wifi password — {pw}", pw),
        Case("password in prose: quoted", "secret next to its name", f"The root password is '{pw}'.", pw),
        Case("passphrase in prose", "secret next to its name", f"gpg passphrase is {pw}", pw),
        Case("secret in prose", "secret next to its name", f"the webhook secret is {pw}", pw),
        Case("token in prose: hex", "secret next to its name", f"api token {hexkey}", hexkey),
        Case("api key in prose: hex", "secret next to its name", f"Their API key is {hexkey}.", hexkey),
        Case("credentials in prose", "secret next to its name", f"credentials: admin / {pw}", pw),
        Case("password in prose: fullwidth", "secret next to its name", f"password is {fullwidth(pw)}", fullwidth(pw)),
        Case("password in prose: zero-width", "secret next to its name", f"password is {zero_width(pw)}",
             zero_width(pw)),
    ]
    rsa1 = pem_body(_der(b"\x30\x82\x04\xa4\x02\x01\x00\x02\x82\x01\x01\x00", 600))
    pkcs8 = pem_body(_der(b"\x30\x82\x04\xbe\x02\x01\x00\x30\x0d\x06\x09\x2a\x86\x48\x86\xf7\x0d\x01\x01\x01\x05\x00"
                          b"\x04\x82\x04\xa8", 600))
    ec = pem_body(_der(b"\x30\x77\x02\x01\x01\x04\x20", 112))
    openssh = pem_body(b"openssh-key-v1\x00" + _der(b"\x00\x00\x00\x04none", 300))
    end_line = "-----END " + "RSA PRIVATE KEY-----"
    out += [
        Case("RSA key body without BEGIN", "private key", f"the deploy key:\n{rsa1}\n", rsa1[:64]),
        Case("PKCS#8 key body without BEGIN", "private key", f"key:\n{pkcs8}\n", pkcs8[:64]),
        Case("EC key body without BEGIN", "private key", f"{ec}\n", ec[:64]),
        Case("OpenSSH key body without BEGIN", "private key", f"id_ed25519:\n{openssh}\n", openssh[:64]),
        Case("RSA key body, one line", "private key", "k " + rsa1.replace("\n", ""), rsa1[:64]),
        Case("RSA key body, quoted in markdown", "private key", "> " + rsa1.replace("\n", "\n> "), rsa1[:64]),
        Case("key body with its END line only", "private key", f"{rsa1}\n{end_line}\n", end_line),
        Case("private key: base64 of the whole PEM", "base64",
             "pem " + b64("-----BEGIN " + f"PRIVATE KEY-----\n{pkcs8}\n-----END " + "PRIVATE KEY-----\n"),
             b64("-----BEGIN " + "PRIVATE KEY-----\n")[:20]),
    ]
    return out


CORPUS: list[Case] = _cases()


# Harmless text that looks like a secret: the guard must let memory hold it.
LOOKALIKES: list[str] = list(BENIGN)
