"""The secret scanner: a corpus of real shapes always denied, real memory folders never flagged.

Every secret below is built at run time from pieces (and random characters of the right alphabet),
so this file holds no literal that a secret scanner would flag, yet each value has the exact shape
of the real thing.
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
import time
from pathlib import Path
from typing import Any

import pytest

from memd.config import Config, HooksConfig
from memd.core import secrets
from memd.hooks.context import HookContext
from memd.hooks.tool_use import pre_tool_use

_rng = random.Random(20261129)
UP = string.ascii_uppercase
LOW = string.ascii_lowercase
DIG = string.digits
ALNUM = UP + LOW + DIG
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "_-"


def r(alphabet: str, n: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def _jwt() -> str:
    def seg(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{seg({'alg': 'HS256', 'typ': 'JWT'})}.{seg({'sub': '1234567890', 'name': 'x'})}.{r(URLSAFE, 43)}"


def _pem(kind: str) -> str:
    label = f"{kind} PRIVATE KEY".strip()
    return f"-----BEGIN {label}-----\n{r(B64, 64)}\n{r(B64, 64)}\n-----END {label}-----"


# (kind the scanner must report, text as it might appear in a memory)
CORPUS: list[tuple[str, str]] = [
    ("AWS access key", "aws key " + "AKIA" + r(UP + DIG, 16)),
    ("AWS access key", "temporary creds " + "ASIA" + r(UP + DIG, 16)),
    ("AWS secret key", "aws_secret_access_key = " + r(ALNUM + "/+", 40)),
    ("password assignment", "AWS_SESSION_TOKEN=" + r(ALNUM + "/+", 120)),
    ("Google API key", "maps key " + "AI" + "za" + r(URLSAFE, 35)),
    ("Google OAuth secret", "client secret " + "GOC" + "SPX-" + r(URLSAFE, 28)),
    ("Google service account key", '{"type": "service_account", "private_key_id": "' + r(HEX, 40) + '"}'),
    ("Google OAuth token", "bearer ya" + "29." + r(URLSAFE, 60)),
    ("Google OAuth refresh token", "refresh 1/" + "/0" + r(URLSAFE, 60)),
    ("Azure storage key", "DefaultEndpointsProtocol=https;AccountName=acme;Account" + "Key=" + r(B64, 86) + "==;"),
    ("Azure shared access key", "Endpoint=sb://acme.servicebus.windows.net/;SharedAccess" + "Key=" + r(B64, 44)),
    ("Azure AD client secret", "client secret " + r(ALNUM, 3) + "8Q~" + r(ALNUM + "_~.-", 34)),
    ("Azure SAS token", "https://acme.blob.core.windows.net/c?sv=2024-08-04&ss=b&srt=o&sp=r&sig="
     + r(ALNUM, 40) + "%3D"),
    ("GitHub token", "gh" + "p_" + r(ALNUM, 36)),
    ("GitHub token", "gh" + "s_" + r(ALNUM, 36)),
    ("GitHub fine-grained token", "github" + "_pat_" + r(ALNUM, 22) + "_" + r(ALNUM, 59)),
    ("GitLab token", "gl" + "pat-" + r(URLSAFE, 20)),
    ("Bitbucket app password", "AT" + "BB" + r(ALNUM, 32)),
    ("Anthropic API key", "sk-" + "ant-api03-" + r(URLSAFE, 93) + "AA"),
    ("Anthropic API key", "sk-" + "ant-admin01-" + r(URLSAFE, 93) + "AA"),
    ("OpenAI API key", "sk-" + "proj-" + r(URLSAFE, 74) + "T3Blbk" + "FJ" + r(URLSAFE, 74)),
    ("OpenAI API key", "sk-" + r(ALNUM, 20) + "T3Blbk" + "FJ" + r(ALNUM, 20)),
    ("Stripe key", "sk" + "_live_" + r(ALNUM, 24)),
    ("Stripe key", "rk" + "_live_" + r(ALNUM, 24)),
    ("Stripe webhook secret", "wh" + "sec_" + r(ALNUM, 32)),
    ("Slack token", "xo" + "xb-" + r(DIG, 12) + "-" + r(DIG, 13) + "-" + r(ALNUM, 24)),
    ("Slack webhook", "https://hooks.slack.com/services/T" + r(UP + DIG, 8) + "/B" + r(UP + DIG, 8) + "/"
     + r(ALNUM, 24)),
    ("Slack app token", "xa" + "pp-1-A" + r(UP + DIG, 10) + "-" + r(DIG, 13) + "-" + r(HEX, 64)),
    ("Twilio key", "SK" + r(HEX, 32)),
    ("SendGrid key", "S" + "G." + r(URLSAFE, 22) + "." + r(URLSAFE, 43)),
    ("npm token", "np" + "m_" + r(ALNUM, 36)),
    ("PyPI token", "py" + "pi-AgEIcHlwaS5vcmc" + r(URLSAFE, 70)),
    ("Hugging Face token", "h" + "f_" + r(ALNUM, 34)),
    ("DigitalOcean token", "do" + "p_v1_" + r(HEX, 64)),
    ("Shopify token", "shp" + "at_" + r(HEX, 32)),
    ("Databricks token", "dap" + "i" + r(HEX, 32)),
    ("HashiCorp Vault token", "hv" + "s." + r(URLSAFE, 90)),
    ("Linear API key", "lin" + "_api_" + r(ALNUM, 40)),
    ("Grafana token", "gl" + "sa_" + r(ALNUM, 32) + "_" + r(HEX, 8)),
    ("Postman API key", "PM" + "AK-" + r(HEX, 24) + "-" + r(HEX, 34)),
    ("OpenRouter API key", "sk-" + "or-v1-" + r(HEX, 64)),
    ("Groq API key", "gs" + "k_" + r(ALNUM, 52)),
    ("Atlassian API token", "ATA" + "TT3" + r(URLSAFE, 180)),
    ("age secret key", "AGE-" + "SECRET-KEY-1" + r(UP + DIG, 58)),
    ("Discord bot token", "M" + r(ALNUM, 23) + "." + r(URLSAFE, 6) + "." + r(URLSAFE, 27)),
    ("Telegram bot token", r(DIG, 9) + ":AA" + r(URLSAFE, 33)),
    ("JSON web token", "session cookie " + _jwt()),
    ("private key block", _pem("RSA")),
    ("private key block", _pem("OPENSSH")),
    ("private key block", _pem("EC")),
    ("private key block", _pem("")),
    ("private key block", "-----BEGIN PGP " + "PRIVATE KEY BLOCK-----\n" + r(B64, 64)),
    ("password in URL", "db: postgres://app:" + r(ALNUM, 16) + "@db.internal:5432/prod"),
    ("password in URL", "MONGO_URI is mongodb+srv://admin:" + r(ALNUM, 12) + "@cluster0.example.net/x"),
    ("password in URL", "proxy https://user:" + r(ALNUM, 10) + "@proxy.corp:8080"),
    ("password assignment", "DB_PASSWORD=" + r(ALNUM, 14)),
    ("password assignment", "export STRIPE_SECRET=" + r(ALNUM, 24)),
    ("password assignment", "API_KEY='" + r(ALNUM, 32) + "'"),
    ("password assignment", "  JWT_SECRET = " + r(ALNUM, 20)),
    ("credential assignment", 'password: "' + r(LOW, 6) + r(DIG, 4) + '"'),
    ("credential assignment", '{"client_secret": "' + r(ALNUM, 10) + r(DIG, 3) + '"}'),
    ("netrc password", "machine api.example.com login bot password " + r(ALNUM, 12)),
    ("authorization header", "curl -H 'Authorization: Bearer " + r(URLSAFE, 40) + "'"),
    ("Kubernetes client key", "    client-key-data: " + r(B64, 200)),
    ("Docker registry auth", '{"auths": {"ghcr.io": {"auth": "' + base64.b64encode(b"u:" + r(ALNUM, 20).encode()
                                                                                 ).decode() + '"}}}'),
]

# Text that looks a little like a secret but is not one: none may be flagged.
BENIGN = [
    "password: ask the admin",
    "Token: see the vault entry 'deploy'",
    "API_KEY=${API_KEY}",
    "OPENAI_API_KEY=<your key here>",
    "DB_PASSWORD=changeme",
    "SECRET_KEY=***",
    "the key is in 1Password under 'prod db'",
    "AWS keys live in ~/.aws/credentials (profile: work)",
    "Use `git@github.com:org/repo.git` for cloning",
    "http://localhost:8080/api",
    "the commit is 3f2b9a64c1e04d8e9a7b5e6f7a8b9c0d12345678",
    "uuid 3f2b9a64-1c0e-4d8e-9a7b-5e6f7a8b9c0d",
    "- [Auth flow](reference_auth.md) — how tokens are refreshed (TOKEN_TTL=3600s)",
    "Pin PASSWORD_MIN_LENGTH=12 in settings",
    "use sk_test_ keys only in CI",
    "ssh-ed25519 is the key type we use",
    "-----BEGIN PUBLIC KEY-----",
    "call 555-0199",  # too short to be a full number
    "version 1.2.3.4 and port 5432",
]


def test_the_corpus_has_at_least_30_distinct_shapes() -> None:
    assert len({k for k, _ in CORPUS}) >= 30
    assert len(CORPUS) >= 60


@pytest.mark.parametrize(("kind", "text"), CORPUS, ids=[f"{i:02d}-{k}" for i, (k, _) in enumerate(CORPUS)])
def test_every_shape_is_found(kind: str, text: str) -> None:
    hits = secrets.scan(text)
    assert hits, f"not flagged: {kind}"
    assert kind in {h.kind for h in hits}
    assert hits[0].line >= 1 and hits[0].column >= 1


@pytest.mark.parametrize("text", BENIGN)
def test_benign_text_is_not_flagged(text: str) -> None:
    assert secrets.scan(text) == []


def test_positions_and_redaction() -> None:
    key = "gh" + "p_" + r(ALNUM, 36)
    text = f"line one\n  token {key} here\n"
    (hit,) = secrets.scan(text)
    assert (hit.kind, hit.line, hit.column) == ("GitHub token", 2, 9)
    red = secrets.redact(text)
    assert key not in red and "[GitHub token redacted]" in red


def test_personal_data_only_in_strict_mode() -> None:
    text = "Contact: jane.doe" + "@acme-corp.io, +44 20 7946 0958."
    assert secrets.scan(text) == []
    kinds = {h.kind for h in secrets.scan(text, strict=True)}
    assert kinds == {"e-mail address", "phone number"}
    assert secrets.scan(text, strict=True, pii=False) == []
    assert secrets.scan("mail me at someone@example.com", strict=True) == []  # documentation domain


def _hc(tmp_path: Path, team_pii: bool = True) -> HookContext:
    hc = HookContext(claude_dir=str(tmp_path / "claude"))
    hc._config = Config(hooks=HooksConfig(team_pii=team_pii))
    return hc


def test_every_shape_is_denied_by_the_pre_tool_use_hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    memory = tmp_path / "claude" / "projects" / "-home-dev-app" / "memory"
    hc = _hc(tmp_path)
    for i, (kind, text) in enumerate(CORPUS):
        for tool in ("Write", "Edit", "MultiEdit"):
            tool_input: dict[str, object] = {"file_path": str(memory / f"m{i}.md")}
            if tool == "Write":
                tool_input["content"] = f"---\nname: m\n---\n{text}\n"
            elif tool == "Edit":
                tool_input.update(old_string="x", new_string=text)
            else:
                tool_input["edits"] = [{"old_string": "a", "new_string": "ok"},
                                       {"old_string": "b", "new_string": text}]
            ev = {"hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": tool_input, "cwd": "/"}
            answer = pre_tool_use(ev, hc)
            assert answer is not None, (kind, tool)
            hso = answer["hookSpecificOutput"]
            assert hso["permissionDecision"] == "deny"
            reason = hso["permissionDecisionReason"]
            assert kind in reason
            # the reason never repeats the secret (nor any long piece of it)
            secret_part = max(text.split(), key=len)
            assert secret_part[-12:] not in reason


def test_real_memory_folders_raise_no_false_alarm(claude_data: Path, monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    files = sorted(claude_data.glob("projects/*/memory/**/*.md"))
    assert len(files) >= 20
    hc = HookContext(claude_dir=str(claude_data))
    hc._config = Config()
    for f in files:
        text = f.read_text(encoding="utf-8", errors="replace")
        assert secrets.scan(text) == [], f
        # and the hook lets Claude Code write each of them back (Write) and edit them (Edit)
        for tool_input in ({"file_path": str(f), "content": text},
                           {"file_path": str(f), "old_string": "x", "new_string": text}):
            ev = {"hook_event_name": "PreToolUse", "tool_name": "Write" if "content" in tool_input else "Edit",
                  "tool_input": tool_input, "cwd": "/"}
            assert pre_tool_use(ev, hc) is None, f


def _span_text(size: int) -> str:
    """About ``size`` characters of a rendered span: prose, a netrc line and a key (so their rules
    run), and one run of blank lines a 32nd of the text long (a tool's padded output)."""
    line = ("[2026-03-05 Thu 10:00 UTC] USER: the deploy token lives in the vault, see my netrc:\n"
            "machine db login app password FAKEpw1234\nand the key sk_" + "live_FAKEfake0000FAKEfake0000\n")
    body = line * (size // len(line))
    gap = "\n" * (size // 32)
    half = len(body) // 2
    return body[:half] + gap + body[half:]


def _best(fn: Any, text: str) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        fn(text)
        best = min(best, time.process_time() - t0)
    return best


def test_redacting_a_large_span_is_linear() -> None:
    big, small = _span_text(1 << 20), _span_text(1 << 18)
    counts: dict[str, int] = {}
    out = secrets.redact(big, marker="[REDACTED:{kind}]", counts=counts)
    assert "FAKEpw1234" not in out and "FAKEfake0000" not in out and counts["netrc password"] > 1000

    def redact(t: str) -> None:
        secrets.redact(t, marker="[REDACTED:{kind}]")

    def plain(t: str) -> None:  # one plain pass over the same bytes
        sum(1 for _ in re.finditer(r"\S+", t))

    t_big, t_small = _best(redact, big), _best(redact, small)
    assert t_big / t_small < 10, (t_big, t_small)  # 4x the text: about 4x the time, not 16x
    assert t_big / _best(plain, big) < 50, t_big  # about 5 here; the quadratic rule made it hundreds
