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


# --------------------------------------------------------------------------- issue 34: provider shapes

class Secret(Record):
    provider: str  # whose secret (a provider, or "generic: <form>" for a password under a name)
    text: str  # as it would be written into memory or said in a session
    secret: str  # what must not survive redaction nor reach the model


def _p(provider: str, value: str, *contexts: str) -> list[Secret]:
    """A provider's value in each of the contexts (``{v}`` is the value), or bare in a note."""
    forms = contexts or ("the key is {v}",)
    return [Secret(provider, c.format(v=value), value) for c in forms]


def _b32low(n: int) -> str:
    return r("abcdefghijklmnopqrstuvwxyz234567", n)


def _providers() -> list[Secret]:
    """At least 250 secrets of 60+ providers, each with the shape its provider documents (the public rule
    sets: gitleaks, trufflehog, GitHub's secret scanning), every character random of the right alphabet."""
    out: list[Secret] = []
    add = out.extend
    # cloud
    add(_p("AWS", "AKIA" + r(UP + "234567", 16), "id {v}", "aws_access_key_id = {v}", "- AWS key {v} (ci)"))
    add(_p("AWS", r(ALNUM, 18) + "/" + r(ALNUM, 10) + "+" + r(ALNUM, 10), "aws_secret_access_key={v}",
           "secret: {v}"))
    add(_p("AWS Bedrock", "ABSK" + r(B64, 132), "bedrock key {v}"))
    add(_p("Google Cloud", "AI" + "za" + r(URLSAFE, 35), "maps {v}", "GOOGLE_API_KEY={v}"))
    add(_p("Google OAuth", "GOC" + "SPX-" + r(URLSAFE, 28), "client secret {v}"))
    add(_p("Google OAuth", "ya" + "29." + r(URLSAFE, 80), "access token {v}"))
    add(_p("Firebase Cloud Messaging", "AAAA" + r(URLSAFE, 7) + ":APA91b" + r(URLSAFE, 134),
           "FCM server key {v}", "fcm_server_key: {v}", '"serverKey": "{v}"'))
    add(_p("Azure", r(ALNUM, 3) + "8Q~" + r(ALNUM + "_~.-", 34), "client secret {v}", "AZURE_CLIENT_SECRET={v}"))
    add(_p("Azure Storage", "DefaultEndpointsProtocol=https;AccountName=acme;Account" + "Key=" + r(B64, 86) + "==",
           "{v}"))
    add(_p("Alibaba Cloud", "LTAI" + r(ALNUM, 20), "aliyun {v}", "ALIBABA_ACCESS_KEY_ID={v}"))
    add(_p("Tencent Cloud", "AKID" + r(ALNUM, 32), "tencent {v}"))
    add(_p("Scaleway", "SCW" + r(UP + DIG, 17), "scaleway access key {v}"))
    add(_p("DigitalOcean", "do" + "p_v1_" + r(HEX, 64), "{v}", "DIGITALOCEAN_TOKEN={v}"))
    add(_p("Cloudflare", "v1.0-" + r(HEX, 24) + "-" + r(HEX, 146), "origin ca key {v}"))
    add(_p("Cloudflare", r(URLSAFE, 40), "CLOUDFLARE_API_TOKEN={v}", "cloudflare_token: {v}"))
    add(_p("Heroku", "HRKU-AA" + r(URLSAFE, 58), "heroku {v}"))
    add(_p("Fly.io", "fo1_" + r(URLSAFE, 43), "fly {v}"))
    add(_p("Fly.io", "fm2_" + r(B64, 160), "FLY_API_TOKEN={v}"))
    add(_p("Netlify", "nf" + "p_" + r(ALNUM, 36), "netlify {v}"))
    add(_p("Render", "rn" + "d_" + r(ALNUM, 32), "render key {v}"))
    add(_p("Deno Deploy", "dd" + "p_" + r(ALNUM, 36), "deno {v}"))
    add(_p("Supabase", "sb" + "p_" + r(HEX, 40), "supabase {v}"))
    add(_p("Supabase", "sb_" + "secret_" + r(URLSAFE, 32), "SUPABASE_SERVICE_KEY: {v}"))
    add(_p("PlanetScale", "pscale" + "_tkn_" + r(URLSAFE, 43), "{v}"))
    add(_p("PlanetScale", "pscale" + "_pw_" + r(URLSAFE, 43), "DATABASE_PASSWORD={v}", "pw {v}"))
    add(_p("Terraform Cloud", r(ALNUM, 14) + ".atlas" + "v1." + r(URLSAFE, 67), "TFE_TOKEN={v}", "{v}"))
    add(_p("Pulumi", "pu" + "l-" + r(HEX, 40), "pulumi {v}"))
    add(_p("HashiCorp Vault", "hv" + "s." + r(URLSAFE, 90), "VAULT_TOKEN={v}", "root token {v}"))
    add(_p("Doppler", "dp" + ".pt." + r(ALNUM, 43), "{v}"))
    add(_p("1Password", "A3-" + r(UP + DIG, 6) + "-" + r(UP + DIG, 11) + "-" + "-".join(r(UP + DIG, 5) for _ in "abc"),
           "secret key {v}"))
    add(_p("1Password", "op" + "s_eyJ" + r(B64, 300), "OP_SERVICE_ACCOUNT_TOKEN={v}"))
    # source control and CI
    add(_p("GitHub", "gh" + "p_" + r(ALNUM, 36), "{v}", "GITHUB_TOKEN={v}", "token: {v}"))
    add(_p("GitHub", "gh" + "o_" + r(ALNUM, 36), "oauth {v}"))
    add(_p("GitHub", "gh" + "s_" + r(ALNUM, 36), "app {v}"))
    add(_p("GitHub", "github" + "_pat_" + r(ALNUM, 22) + "_" + r(ALNUM, 59), "{v}", "GH_PAT: {v}"))
    add(_p("GitLab", "gl" + "pat-" + r(URLSAFE, 20), "{v}", "GITLAB_TOKEN={v}", "gitlab token: {v}"))
    add(_p("GitLab", "gl" + "rt-" + r(URLSAFE, 20), "runner {v}"))
    add(_p("GitLab", "gl" + "dt-" + r(URLSAFE, 20), "deploy token {v}"))
    add(_p("GitLab", "gl" + "ffct-" + r(URLSAFE, 20), "feature flags {v}"))
    add(_p("GitLab", "GR13" + "48941" + r(URLSAFE, 20), "registration {v}"))
    add(_p("Bitbucket", "AT" + "BB" + r(ALNUM, 32), "app password {v}"))
    add(_p("Atlassian", "ATA" + "TT3" + r(URLSAFE, 186), "JIRA_API_TOKEN={v}", "{v}"))
    add(_p("CircleCI", "CCI" + "PAT_" + r(ALNUM, 22) + "_" + r(HEX, 40), "{v}"))
    add(_p("Buildkite", "bk" + "ua_" + r(HEX, 40), "buildkite {v}"))
    add(_p("Harness", "pat." + r(URLSAFE, 22) + "." + r(ALNUM, 24) + "." + r(ALNUM, 20), "harness {v}"))
    add(_p("Sourcegraph", "sg" + "p_" + r(HEX, 16) + "_" + r(HEX, 40), "{v}"))
    add(_p("Octopus Deploy", "API-" + r(UP + DIG, 26), "octopus {v}"))
    add(_p("JFrog", "AK" + "Cp" + r(ALNUM, 69), "artifactory {v}", "ARTIFACTORY_API_KEY={v}"))
    add(_p("JFrog", "cmVm" + "d" + r(ALNUM, 59), "reference token {v}"))
    add(_p("Azure DevOps", _b32low(52), "AZURE_DEVOPS_PAT={v}", "azure_devops_token: {v}"))
    # package registries
    add(_p("npm", "np" + "m_" + r(ALNUM, 36), "{v}", "//registry.npmjs.org/:_authToken={v}", "NPM_TOKEN={v}"))
    add(_p("PyPI", "py" + "pi-AgEIcHlwaS5vcmc" + r(URLSAFE, 70), "{v}", "password = {v}"))
    add(_p("RubyGems", "rubygems" + "_" + r(HEX, 48), "{v}", "GEM_HOST_API_KEY={v}"))
    add(_p("NuGet", "oy" + "2" + r(LOW + DIG, 43), "nuget key {v}"))
    add(_p("Clojars", "CLOJARS" + "_" + r(LOW + DIG, 60), "{v}"))
    add(_p("Docker Hub", "dckr" + "_pat_" + r(URLSAFE, 27), "docker login -p {v}", "{v}"))
    add(_p("Hugging Face", "h" + "f_" + r(ALNUM, 34), "{v}", "HF_TOKEN={v}"))
    add(_p("Hugging Face", "api" + "_org_" + r(UP + LOW, 34), "{v}"))
    # AI providers
    add(_p("Anthropic", "sk-" + "ant-api03-" + r(URLSAFE, 93) + "AA", "{v}", "ANTHROPIC_API_KEY={v}",
           "anthropic_api_key: {v}"))
    add(_p("Anthropic", "sk-" + "ant-admin01-" + r(URLSAFE, 93) + "AA", "{v}"))
    add(_p("OpenAI", "sk-" + "proj-" + r(URLSAFE, 74) + "T3Blbk" + "FJ" + r(URLSAFE, 74), "{v}", "OPENAI_API_KEY={v}"))
    add(_p("OpenAI", "sk-" + "svcacct-" + r(URLSAFE, 58) + "T3Blbk" + "FJ" + r(URLSAFE, 58), "{v}"))
    add(_p("OpenRouter", "sk-" + "or-v1-" + r(HEX, 64), "{v}"))
    add(_p("Groq", "gs" + "k_" + r(ALNUM, 52), "{v}"))
    add(_p("xAI", "xa" + "i-" + r(ALNUM, 80), "{v}"))
    add(_p("Replicate", "r" + "8_" + r(ALNUM, 37), "{v}"))
    add(_p("Perplexity", "pp" + "lx-" + r(ALNUM, 48), "{v}", "PERPLEXITY_API_KEY={v}"))
    add(_p("LangSmith", "lsv2" + "_pt_" + r(HEX, 32) + "_" + r(HEX, 10), "{v}", "LANGSMITH_API_KEY={v}"))
    add(_p("Pinecone", "pc" + "sk_" + r(ALNUM, 5) + "_" + r(ALNUM, 66), "{v}"))
    add(_p("Tavily", "tv" + "ly-" + r(ALNUM, 32), "{v}"))
    add(_p("NVIDIA", "nv" + "api-" + r(URLSAFE, 64), "{v}"))
    add(_p("Cerebras", "cs" + "k-" + r(LOW + DIG, 48), "{v}"))
    add(_p("ElevenLabs", "sk" + "_" + r(HEX, 48), "{v}", "ELEVENLABS_API_KEY={v}"))
    add(_p("Mistral", r(ALNUM, 32), "MISTRAL_API_KEY={v}", "mistral_api_key: {v}"))
    add(_p("Cohere", r(ALNUM, 40), "CO_API_KEY={v}", "COHERE_API_KEY: {v}"))
    # payments and commerce
    add(_p("Stripe", "sk" + "_live_" + r(ALNUM, 24), "{v}", "STRIPE_SECRET_KEY={v}", "stripe_key: {v}"))
    add(_p("Stripe", "rk" + "_live_" + r(ALNUM, 24), "{v}"))
    add(_p("Stripe", "wh" + "sec_" + r(ALNUM, 32), "{v}", "STRIPE_WEBHOOK_SECRET={v}"))
    add(_p("Square", "sq0" + "atp-" + r(URLSAFE, 22), "{v}"))
    add(_p("Square", "sq0" + "csp-" + r(URLSAFE, 43), "{v}"))
    add(_p("Braintree", "access_token$" + "production$" + r(LOW + DIG, 16) + "$" + r(HEX, 32), "{v}"))
    add(_p("Shopify", "shp" + "at_" + r(HEX, 32), "{v}", "SHOPIFY_ACCESS_TOKEN={v}"))
    add(_p("Shopify", "shp" + "ss_" + r(HEX, 32), "{v}"))
    add(_p("Flutterwave", "FLWSECK" + "-" + r(HEX, 32) + "-X", "{v}"))
    add(_p("Duffel", "duffel" + "_live_" + r(URLSAFE, 43), "{v}"))
    add(_p("EasyPost", "EZ" + "AK" + r(ALNUM, 54), "{v}"))
    add(_p("Shippo", "shippo" + "_live_" + r(HEX, 40), "{v}"))
    add(_p("Mollie", "live" + "_" + r(ALNUM, 28) + r(DIG, 2), "{v}"))
    add(_p("GoCardless", "live" + "_" + r(ALNUM, 38) + r(DIG, 2), "GOCARDLESS_ACCESS_TOKEN={v}", "{v}"))
    add(_p("Plaid", "access-" + "production-" + _guid(), "{v}"))
    add(_p("Amazon MWS", "amzn" + ".mws." + _guid(), "{v}"))
    # messaging and communication
    add(_p("Slack", "xo" + "xb-" + r(DIG, 12) + "-" + r(DIG, 13) + "-" + r(ALNUM, 24), "{v}", "SLACK_BOT_TOKEN={v}"))
    add(_p("Slack", "xo" + "xp-" + r(DIG, 12) + "-" + r(DIG, 12) + "-" + r(DIG, 13) + "-" + r(HEX, 32), "{v}"))
    add(_p("Slack", "xo" + "xe.xoxp-1-" + r(ALNUM, 163), "config token {v}"))
    add(_p("Slack", "xa" + "pp-1-A" + r(UP + DIG, 10) + "-" + r(DIG, 13) + "-" + r(HEX, 64), "{v}"))
    add(_p("Slack", "https://hooks.slack.com/services/T" + r(UP + DIG, 8) + "/B" + r(UP + DIG, 8) + "/" + r(ALNUM, 24),
           "{v}"))
    add(_p("Discord", "M" + r(ALNUM, 23) + "." + r(URLSAFE, 6) + "." + r(URLSAFE, 27), "bot {v}"))
    add(_p("Discord", "https://discord.com/api/" + "webhooks/" + r(DIG, 18) + "/" + r(URLSAFE, 68), "{v}"))
    add(_p("Telegram", r(DIG, 9) + ":AA" + r(URLSAFE, 33), "{v}", "TELEGRAM_BOT_TOKEN={v}"))
    add(_p("Twilio", "SK" + r(HEX, 32), "{v}"))
    add(_p("Twilio", r(HEX, 32), "TWILIO_AUTH_TOKEN={v}", "twilio auth_token: {v}"))
    add(_p("Telnyx", "KEY" + r("0123456789ABCDEF", 32) + "_" + r(ALNUM, 22), "{v}"))
    add(_p("SendGrid", "S" + "G." + r(URLSAFE, 22) + "." + r(URLSAFE, 43), "{v}", "SENDGRID_API_KEY={v}"))
    add(_p("Mailgun", "key-" + r(HEX, 32), "{v}"))
    add(_p("Mailchimp", r(HEX, 32) + "-us" + r(DIG, 2), "{v}", "MAILCHIMP_API_KEY={v}"))
    add(_p("Brevo", "xkey" + "sib-" + r(HEX, 64) + "-" + r(ALNUM, 16), "{v}"))
    add(_p("Resend", "r" + "e_" + r(ALNUM, 8) + "_" + r(ALNUM, 24), "{v}"))
    add(_p("Postmark", _guid(), "POSTMARK_SERVER_TOKEN={v}", "postmark_token: {v}"))
    add(_p("Microsoft Teams", f"https://acme.webhook.office.com/webhookb2/{_guid()}@{_guid()}/IncomingWebhook/"
           + r(HEX, 32) + "/" + _guid(), "{v}"))
    # monitoring and observability
    add(_p("New Relic", "NR" + "AK-" + r(UP + DIG, 27), "{v}", "NEW_RELIC_API_KEY={v}", "newrelic key {v}"))
    add(_p("New Relic", "NR" + "JS-" + r(HEX, 19), "{v}"))
    add(_p("New Relic", "NR" + "II-" + r(URLSAFE, 32), "insert key {v}"))
    add(_p("Datadog", r(HEX, 32), "DD_API_KEY={v}", "dd_api_key: {v}"))
    add(_p("Datadog", r(HEX, 40), "DD_APP_KEY={v}", "DATADOG_APP_KEY={v}"))
    add(_p("Sentry", "sntry" + "u_" + r(HEX, 64), "{v}"))
    add(_p("Grafana", "gl" + "sa_" + r(ALNUM, 32) + "_" + r(HEX, 8), "{v}"))
    add(_p("Grafana", "gl" + "c_" + r(B64, 80), "{v}"))
    add(_p("Dynatrace", "dt0" + "c01." + r(UP + DIG, 24) + "." + r(UP + DIG, 64), "{v}"))
    add(_p("Okta", "SSWS 00" + r(URLSAFE, 40), "Authorization: {v}", "header {v}"))
    add(_p("Okta", "00" + r(URLSAFE, 40), "OKTA_API_TOKEN={v}", "okta_token: {v}"))
    add(_p("PagerDuty", r(URLSAFE, 20), "PAGERDUTY_TOKEN={v}"))
    add(_p("Honeycomb", r(ALNUM, 22), "HONEYCOMB_API_KEY={v}"))
    # productivity and SaaS APIs
    add(_p("Linear", "lin" + "_api_" + r(ALNUM, 40), "{v}"))
    add(_p("Notion", "nt" + "n_" + r(DIG, 11) + r(ALNUM, 35), "{v}"))
    add(_p("Notion", "sec" + "ret_" + r(ALNUM, 43), "{v}"))
    add(_p("Airtable", "pat" + r(ALNUM, 14) + "." + r(HEX, 64), "{v}"))
    add(_p("Asana", "2/" + r(DIG, 16) + "/" + r(DIG, 16) + ":" + r(HEX, 32), "{v}"))
    add(_p("Figma", "fig" + "d_" + r(URLSAFE, 40), "{v}"))
    add(_p("HubSpot", "pat-" + "na1-" + _guid(), "{v}"))
    add(_p("Contentful", "CFP" + "AT-" + r(URLSAFE, 43), "{v}"))
    add(_p("Typeform", "tf" + "p_" + r(URLSAFE, 59), "{v}"))
    add(_p("Frame.io", "fio" + "-u-" + r(URLSAFE, 64), "{v}"))
    add(_p("ReadMe", "rd" + "me_" + r(LOW + DIG, 70), "{v}"))
    add(_p("Postman", "PM" + "AK-" + r(HEX, 24) + "-" + r(HEX, 34), "{v}"))
    add(_p("Databricks", "dap" + "i" + r(HEX, 32), "{v}", "DATABRICKS_TOKEN={v}"))
    add(_p("Dropbox", "s" + "l." + r(URLSAFE, 140), "{v}"))
    add(_p("Mapbox", "s" + "k.eyJ" + r(URLSAFE, 60) + "." + r(URLSAFE, 22), "{v}"))
    add(_p("Adobe", "p8" + "e-" + r(ALNUM, 32), "{v}"))
    add(_p("Twitter", "AAAAAAAAAAAAAAAAAAAAA" + r(ALNUM, 60) + "%3D" + r(ALNUM, 40), "bearer {v}"))
    add(_p("Facebook", "EA" + "AC" + r(ALNUM, 120), "{v}"))
    add(_p("Prefect", "pn" + "u_" + r(ALNUM, 36), "{v}"))
    add(_p("Infracost", "ic" + "o-" + r(ALNUM, 32), "{v}"))
    add(_p("MaxMind", r(ALNUM, 6) + "_" + r(ALNUM, 29) + "_m" + "mk", "{v}"))
    add(_p("ClickHouse", "4b" + "1d" + r(ALNUM, 38), "{v}"))
    add(_p("Scalingo", "tk" + "-us-" + r(URLSAFE, 48), "{v}"))
    add(_p("Adafruit IO", "ai" + "o_" + r(UP + LOW, 4) + r(DIG, 2) + r(ALNUM, 22), "{v}"))
    add(_p("OpenShift", "sha256" + "~" + r(URLSAFE, 43), "oc login --token={v}", "{v}"))
    add(_p("age", "AGE-" + "SECRET-KEY-1" + r(UP + DIG, 58), "{v}"))
    add(_p("JSON web token", _jwt(), "session {v}"))
    # private keys and connection strings
    add(_p("private key", "-----BEGIN " + "OPENSSH PRIVATE KEY-----\n" + r(B64, 64)
           + "\n-----END OPENSSH PRIVATE KEY-----", "{v}"))
    add(_p("private key", "-----BEGIN " + "EC PRIVATE KEY-----\n" + r(B64, 64) + "\n-----END EC PRIVATE KEY-----",
           "{v}"))
    add(_p("PostgreSQL", "postgres://app:" + r(ALNUM, 16) + "@db.internal:5432/prod", "{v}"))
    add(_p("MongoDB", "mongodb+srv://admin:" + r(ALNUM, 12) + "@cluster0.mongodb.net/x", "{v}"))
    add(_p("Redis", "redis://:" + r(ALNUM, 18) + "@cache.internal:6379/0", "{v}"))
    # issue 34: passwords under a compound name, as compose, Ansible and Kubernetes files hold them
    def pw() -> str:
        return r(LOW, 4) + r(DIG, 3) + r(UP, 2) + r(LOW, 3)

    def words() -> str:
        return r(LOW, 7) + r(LOW, 6)

    add(_p("generic: compose", pw(), "    POSTGRES_PASSWORD: {v}", "      MYSQL_ROOT_PASSWORD: {v}",
           "      - POSTGRES_PASSWORD={v}", "  REDIS_PASSWORD: '{v}'"))
    add(_p("generic: compose", words(), "    POSTGRES_PASSWORD: {v}", "environment:\n  RABBITMQ_DEFAULT_PASS: {v}"))
    add(_p("generic: Ansible", pw(), "db_password: {v}", "mysql_root_password: \"{v}\"", "vault_db_password: {v}"))
    add(_p("generic: Ansible", words(), "db_password: {v}", "admin_password: \"{v}\"", "  ldap_bind_password: {v}"))
    add(_p("generic: Kubernetes", pw(), "env:\n  - name: DB_PASSWORD\n    value: {v}\n",
           "- name: API_TOKEN\n  value: \"{v}\"", "        - name: STRIPE_SECRET\n          value: {v}"))
    add(_p("generic: Kubernetes", words(), "  - name: ADMIN_PASSWORD\n    value: {v}"))
    add(_p("generic: app key", r(ALNUM, 32), "ALGOLIA_ADMIN_KEY={v}", "DD_APP_KEY={v}", "FIREBASE_APP_KEY={v}",
           "export PUSHER_APP_KEY={v}", "ALGOLIA_ADMIN_KEY: {v}"))
    add(_p("generic: app key", "base64:" + r(B64, 43) + "=", "APP_KEY={v}", "RAILS_MASTER_KEY={v}"))
    add(_p("generic: prose", pw(), "login: admin / {v}", "pass: {v}", "user: deploy, pw: {v}",
           "creds: root / {v}", "login: admin:{v}"))
    add(_p("generic: prose", r(LOW, 5) + "!" + r(DIG, 2) + r(UP, 1) + r(LOW, 2), "pass: {v}", "login: ops / {v}"))
    # disguises: a key spaced one character at a time; a token split over two lines with no word around it
    ghp = "gh" + "p_" + r(ALNUM, 36)
    glpat = "gl" + "pat-" + r(URLSAFE, 20)
    for key in (ghp, glpat, "AKIA" + r(UP + "234567", 16), "sk" + "_live_" + r(ALNUM, 24)):
        out.append(Secret("disguise: spaced", " ".join(key), " ".join(key)[-12:]))
        out.append(Secret("disguise: two lines", f"{key[:len(key) // 2]}\n{key[len(key) // 2:]}\n",
                          key[len(key) // 2:]))
    return out


def _jwt() -> str:
    def seg(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{seg({'alg': 'HS256', 'typ': 'JWT'})}.{seg({'sub': '1234567890', 'name': 'x'})}.{r(URLSAFE, 43)}"


PROVIDER_SECRETS: list[Secret] = _providers()


def _more() -> list[Secret]:
    """More of the shapes the issue found let through, in the forms people paste them."""
    out = []
    for name in ("DB_PASSWORD", "KEYCLOAK_ADMIN_PASSWORD", "GF_SECURITY_ADMIN_PASSWORD", "MINIO_ROOT_PASSWORD",
                 "RABBITMQ_DEFAULT_PASS", "SMTP_PASS"):
        v = r(LOW, 3) + r(UP, 3) + r(DIG, 3) + r(LOW, 3)
        out.append(Secret("generic: compose", f"services:\n  app:\n    environment:\n      {name}: {v}\n", v))
    for name in ("db_password", "admin_password", "redis_password", "smtp_password"):
        v = r(ALNUM, 14)
        out.append(Secret("generic: Ansible", f'{name}: "{v}"', v))
    return out


PROVIDER_SECRETS += _more()

# Issue 34's look-alikes: a reference, a placeholder or a description where a secret would be; none may be
# denied nor redacted (the bar: at most 1 in 100)
LOOKALIKES += [
    "ANTHROPIC_API_KEY=sk-ant-...",
    "export ANTHROPIC_API_KEY=sk-" + "ant-api03-...",
    "OPENAI_API_KEY=sk-proj-…",
    "the key looks like sk-" + "ant-api03-... (ask Dana for one)",
    "DB_PASSWORD=[REDACTED]",
    "password: [REDACTED]",
    "api_key: [REDACTED:Anthropic API key]",
    "POSTGRES_PASSWORD: [redacted]",
    'password = os.environ["DB_PASSWORD"]',
    "DB_PASSWORD = os.environ['DB_PASSWORD']",
    "API_KEY = os.getenv('API_KEY')",
    "const token = process.env.GITHUB_TOKEN",
    "STRIPE_SECRET_KEY=${STRIPE_SECRET_KEY}",
    "POSTGRES_PASSWORD: ${POSTGRES_PASSWORD}",
    "    POSTGRES_PASSWORD: $POSTGRES_PASSWORD",
    "      - POSTGRES_PASSWORD=${DB_PASS:-}",
    "POSTGRES_PASSWORD_FILE: /run/secrets/postgres_password",
    "db_password: \"{{ vault_db_password }}\"",
    "db_password: \"{{ lookup('env', 'DB_PASSWORD') }}\"",
    "admin_password: !vault |",
    "secretName: tls-cert-prod",
    "  - name: DB_PASSWORD\n    valueFrom:\n      secretKeyRef:\n        name: db-creds\n        key: password",
    "  - name: LOG_LEVEL\n    value: debug",
    "  - name: API_TOKEN_TTL\n    value: \"3600\"",
    "password_min_length: 12",
    "token_ttl: 3600",
    "db_password: required",
    "admin_password: changeme",
    "smtp_password: none",
    "db_password: ask the DBA",
    "login: admin / see 1Password",
    "login: admin / ask Dana",
    "pass: 3 of 5 tests",
    "pass: --verbose to the runner",
    "the tests pass: all 240 of them",
    "user: deploy, the key is in the vault",
    "RAILS_MASTER_KEY lives in config/master.key, never in git",
    "APP_KEY=base64:... (generate with php artisan key:generate)",
    "ALGOLIA_ADMIN_KEY=<admin key from the dashboard>",
    "DD_APP_KEY=$DD_APP_KEY",
    "SSWS tokens are Okta's API tokens; ours is in Vault",
    "New Relic keys start with NRAK-",
    "FCM server keys (AAAA…:APA91b…) are deprecated; use HTTP v1",
    "a b c d e f g h i j k l m n o p q r s t u v w x y z",
    "1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8",
    "x = a + b * c - d / e + f * g - h / i + j",
    "commits:\na94a8fe5ccb19ba61c4c0873d391e987982fbbd3\n5d41402abc4b2a76b9719d911017c592abcdef12",
    "uuids:\n123e4567-e89b-12d3-a456-426614174000\n9b2c6a1e-3f4d-4e5a-8b7c-1d2e3f4a5b6c",
    "TOKEN_TTL=3600\nSECRET_ROTATION_DAYS=90\n",
    "versions:\nnode-22.4.0-linux-x64\npython-3.11.7-amd64",
    "MemoryStore.rebuildIndex\nMemoryStore.applyChanges",
    "token refresh: see src/auth/refresh.py",
    "mysql -u root -p$MYSQL_ROOT_PASSWORD",
    "psql \"postgresql://app:${PGPASSWORD}@db/prod\"",
    "docker login -u ci -p \"$CI_REGISTRY_PASSWORD\" $CI_REGISTRY",
    "the secret is stored under secret/data/ci/github in Vault",
    "api_key: see the ops vault",
    "client_secret: from Azure portal, 24 months",
    "GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}",
    "NPM_TOKEN: ${{ secrets.NPM_TOKEN }}",
    # from real transcripts (go test's output, a docs snippet)
    "--- PASS: TestLoadSessionState_WithEndedAt (0.07s)",
    "--- PASS: TestPrepareCommitMsg_AmendPreservesExistingTrailer (0.06s)\nok  \tcli/internal\t0.412s",
    'export GH_TOKEN="github_pat_xxxx"',
    "User: alice, role: admin2 (see the ACL)",
]
