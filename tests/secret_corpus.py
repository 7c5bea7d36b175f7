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
import json
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
    return out + _issue_22()


HEX = "0123456789abcdef"
URLSAFE = ALNUM + "_-"


def _guid() -> str:
    return "-".join(r(HEX, n) for n in (8, 4, 4, 4, 12))


def _variants(name: str, kind: str, line: str, secret: str, multiline: bool = False) -> list[Case]:
    """One shape as memory holds it: in prose, a code fence, a table cell, frontmatter and JSON (a line
    of several lines is shown in prose, a fence and a JSON string only)."""
    out = [Case(f"{name}: prose", kind, f"Note for the team: {line} (prod, do not share)", secret),
           Case(f"{name}: code fence", kind, f"Run this:\n```\n{line}\n```\n", secret),
           Case(f"{name}: JSON", kind, json.dumps({"note": line, "env": "prod"}), json.dumps(secret)[1:-1])]
    if not multiline:
        out += [Case(f"{name}: table cell", kind, f"| env | value |\n|---|---|\n| prod | {line} |\n", secret),
                Case(f"{name}: frontmatter", kind, f"---\nname: creds\ndescription: {line}\ntype: reference\n---\nx\n",
                     secret)]
    return out


def _issue_22() -> list[Case]:
    """The shapes issue 22 found let through, each with its variants."""
    pw = r(LOW, 3) + r(DIG, 2) + r(UP, 2) + r(LOW, 3) + r(DIG, 2)  # a password a user picks
    words = r(LOW, 7) + r(LOW, 7)  # letters only: caught where quoted or in a block
    npm = "np" + "m_" + r(ALNUM, 36)
    ghp = "gh" + "p_" + r(ALNUM, 36)
    aws = "AKIA" + r(UP + "234567", 16)
    pk_body = pem_body(_der(b"\x30\x82\x04\xbe\x02\x01\x00\x30\x0d\x06\x09\x2a\x86\x48\x86\xf7\x0d\x01\x01\x01\x05\x00"
                            b"\x04\x82\x04\xa8", 300))
    pem = "-----BEGIN " + "PRIVATE KEY-----\n" + pk_body + "\n-----END " + "PRIVATE KEY-----\n"
    service_account = json.dumps({"type": "service_account", "project_id": "acme-prod", "private_key": pem,
                                  "client_email": "deploy@acme-prod.iam.gserviceaccount.com"}, indent=2)
    discord = "https://discord.com/api/" + "webhooks/" + r(DIG, 18) + "/" + r(URLSAFE, 68)
    teams = (f"https://acme.webhook.office.com/webhookb2/{_guid()}@{_guid()}/IncomingWebhook/" + r(HEX, 32) + "/"
             + _guid())
    slack_wf = ("https://hooks.slack.com/" + "workflows/T" + r(UP + DIG, 9) + "/A" + r(UP + DIG, 10) + "/"
                + r(DIG, 18) + "/" + r(ALNUM, 24))
    shapes: list[tuple[str, str, str, str, bool]] = [  # name, kind, line, secret, multiline
        ("redis URL without a user", "password in URL", f"redis://:{pw}@cache.internal:6379/0", pw, False),
        ("amqp URL without a user", "password in URL", f"amqp://:{pw}@mq.internal:5672/", pw, False),
        ("postgres URL", "password in URL", f"postgresql://app:{pw}@db.internal:5432/prod", pw, False),
        ("mysql URL", "password in URL", f"mysql://root:{pw}@10.0.0.5:3306/shop", pw, False),
        ("sqlserver URL", "password in URL", f"sqlserver://sa:{pw}@db:1433", pw, False),
        ("jdbc password parameter", "password in URL", f"jdbc:postgresql://db:5432/prod?user=app&password={pw}", pw,
         False),
        (".npmrc token, UUID", "npm token", f"//registry.npmjs.org/:_authToken={_guid()}", "_authToken", False),
        (".npmrc token, npm_", "npm token", f"//registry.npmjs.org/:_authToken={npm}", npm, False),
        ("TestPyPI token", "PyPI token", "py" + "pi-AgENdGVzdC5weXBpLm9yZw" + r(URLSAFE, 70), "AgENdGVzdC5weXBp",
         False),
        ("Discord webhook", "Discord webhook", discord, discord[-30:], False),
        ("Teams webhook", "Teams webhook", teams, teams[-36:], False),
        ("Slack workflow webhook", "Slack webhook", slack_wf, slack_wf[-24:], False),
        ("mysql -p", "password on a command line", f"mysql -u root -p{pw} shop", pw, False),
        ("mysqldump --password=", "password on a command line", f"mysqldump --password={pw} shop", pw, False),
        ("curl -u", "password on a command line", f"curl -u deploy:{pw} https://api.internal/v1", pw, False),
        ("sshpass -p", "password on a command line", f"sshpass -p '{pw}' ssh root@bastion", pw, False),
        ("PGPASSWORD before psql", "password on a command line", f"cd /srv && PGPASSWORD={pw} psql -h db -U app", pw,
         False),
        ("YAML password, quoted", "credential assignment", f'password: "{words}"', words, False),
        ("TOML passwd, quoted", "credential assignment", f"passwd = '{words}'", words, False),
        ("YAML secret, quoted", "credential assignment", f'secret: "{words}"', words, False),
        ("YAML pwd, quoted", "credential assignment", f"pwd: '{words}'", words, False),
        ("YAML password, block scalar", "credential assignment", f"db:\n  password: |\n    {words}\n", words, True),
        ("private key in JSON escapes", "private key", service_account, pk_body[:40], True),
        ("GitHub token, JSON escape", "GitHub token", ghp.replace("_", "\\u005f"), ghp[-20:], False),
        ("AWS key id, split after the prefix", "AWS access key", aws[:4] + " " + aws[4:], aws[4:], False),
        ("GitHub token, split after the prefix", "GitHub token", ghp[:4] + " " + ghp[4:], ghp[4:], False),
        ("AWS key id, grouped", "AWS access key", " ".join(aws[i:i + 4] for i in range(0, 20, 4)), aws[-4:], False),
        ("AWS key id, dashed", "AWS access key", "-".join(aws[i:i + 4] for i in range(0, 20, 4)), aws[-4:], False),
        ("password after a token word", "secret next to its name",
         f"token rotation: see the vault; the admin password is {pw}", pw, False),
    ]
    out: list[Case] = []
    for name, kind, line, secret, multiline in shapes:
        out += _variants(name, kind, line, secret, multiline)
    cut_ant = "sk-" + "ant-api03-" + r(URLSAFE, 40)
    out += [
        Case("GitHub token, split after the prefix by a line break", "GitHub token", f"token:\n{ghp[:4]}\n{ghp[4:]}\n",
             ghp[4:]),
        Case("AWS key id, split after the prefix by a line break", "AWS access key", f"{aws[:4]}\n{aws[4:]}", aws[4:]),
        Case("Slack webhook, JSON-escaped slashes", "Slack webhook",
             json.dumps({"url": "https://hooks.slack.com/services/T" + r(UP + DIG, 8) + "/B" + r(UP + DIG, 8) + "/"
                         + "Q" + r(ALNUM, 23)}).replace("/", "\\/"), "hooks.slack.com"),
        Case("key cut at the tool result limit", "Anthropic API key", f"USER: {cut_ant} […1200 more chars]",
             cut_ant[10:]),
        Case("key cut with an ellipsis", "cut token", f"{ghp[:24]}…", ghp[4:24]),
        Case("key cut short at the tool result limit", "cut token", f"{ghp[:12]} […1200 more chars]", ghp[4:12]),
    ]
    return out


CORPUS: list[Case] = _cases()
KEYS: list[tuple[str, str]] = _keys()  # distinctive provider keys, bare


# Harmless text that looks like a secret: the guard must let memory hold it (docs example keys,
# placeholders, environment references, labelled hashes, memory about how secrets are handled).
LOOKALIKES: list[str] = [
    *BENIGN,
    "AWS's example key id is AKIA" + "IOSFODNN7EXAMPLE (from their docs)",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY",
    "the docs use AKIA" + "I44QH8DHBEXAMPLE for a second user",
    "jwt.io sample: eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0"
    "IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
    "Stripe's docs key sk_" + "test_4eC39HqLyjWDarjtT1zdp7dc works in test mode",
    "token format: ghp_" + "X" * 36,
    "AWS ids look like AKIA" + "X" * 16,
    "GITHUB_TOKEN=<your-token>",
    "export OPENAI_API_KEY=<your-api-key>",
    "psql with PGPASSWORD=${PGPASSWORD} from the env",
    "curl -H \"Authorization: Bearer $API_KEY\" https://api.example.com",
    "API_KEY=$API_KEY in CI",
    "password: ${DB_PASSWORD}",
    "redis://:${REDIS_PASSWORD}@cache:6379",
    "postgres://app@db.internal:5432/prod (password from the vault)",
    "postgresql://localhost/dev",
    "mysql -u root -p (it prompts for the password)",
    "docker login --password-stdin < token.txt",
    "curl -u $USER:$TOKEN https://api.internal",
    "docker run -u 1000:1000 image",
    "sshpass -p \"$SSHPASS\" ssh host",
    "//registry.npmjs.org/:_authToken=${NPM_TOKEN}",
    "npm_config_cache=/tmp/npm",
    "image digest sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "the token's sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "integrity sha512-3R4bKqJvHkRxZ8LtQ9w2Yd5FnG6pM1sT0uV7cX4aB2eD8fH9iJ0kL1mN3oP5qR6sT7uV8wX9yZ0aB1cD2eF3gH==",
    "commit a94a8fe5ccb19ba61c4c0873d391e987982fbbd3 fixed the token refresh",
    "sha1: a94a8fe5ccb19ba61c4c0873d391e987982fbbd3",
    "Never paste tokens here: keep them in 1Password and write the item name instead.",
    "Rotate the GitHub token every 90 days; the secret lives in Vault at secret/ci/github.",
    "The password policy: at least 12 characters, one digit, one symbol.",
    "Store API keys in the OS keychain, never in memory files or the repo.",
    "If a secret leaks, revoke it first, then run `memd forget --secrets`.",
    "password: ask the DBA on call",
    "token: rotated weekly by the deploy bot",
    "secret: see the ops runbook, section 4",
    "--password flag is deprecated; use --password-file instead",
    "mysqldump --password (prompts) > backup.sql",
    "Slack webhooks live in the channel settings, not here",
    "Discord webhook URL is in the server's integrations tab",
    "use `pypi-` tokens scoped to one project",
    "the key id starts with AKIA and the secret is 40 characters",
    "ghp_ tokens are classic PATs; github_pat_ ones are fine-grained",
    "uuid 123e4567-e89b-12d3-a456-426614174000 names the tenant",
    "build 2026.03.05-rc1 on node 22.4.0",
    "Bearer tokens expire after 3600s",
    "the hash of the release is md5 5d41402abc4b2a76b9719d911017c592",
    "password reset link: https://example.com/reset?token=<token>",
    "TOKEN_TTL=3600 and SECRET_ROTATION_DAYS=90",
    "redis://localhost:6379/0",
]
