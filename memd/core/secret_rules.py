"""The secret rules, defined once: pattern strings, compiled on first use. Stdlib only.

``SPECS`` (secrets) and ``PII_SPECS`` (personal data, for team memory) are (kind, pattern) pairs;
``specs`` picks a rule set, ``compiled`` compiles one pattern and keeps it for the process, ``rules``
gives a set compiled, and ``collect`` turns a set's matches into hits. Both scanners read them
from here, neither from the other: ``memd.core.secrets.scan_all`` (every rule, the reference) and
``memd.core.fastscan`` (only the rules a text can match). ``memd.core.secrets`` says what the
rules aim at.
"""

from __future__ import annotations

import re

from memd.record import Record

TYPE_CHECKING = False  # typing costs ~3 ms to import; the PreToolUse hook loads this module
if TYPE_CHECKING:
    from collections.abc import Iterable


class SecretHit(Record):
    kind: str  # human-readable kind, e.g. "AWS access key"
    line: int  # 1-based
    column: int  # 1-based


# what a value after a secret's name is not: a reference to the environment or a template, a path, a placeholder
# (``${VAR}``, ``$VAR``, ``<your key>``, ``os.environ[...]``, ``[REDACTED]``, ``sk-ant-...``, ``changeme``), a
# word that describes instead of holds (``required``, ``none``), a number with its unit (``3600s``)
_NOT_A_VALUE = (r"\$|<|%|\{\{|\*{3}|x{3}|\.{3}|…|\[|/|~|\(|\d{1,6}(?:\.\d+)?[a-z]{0,3}(?![\w.\-])|"
                r"(?i:os\.environ|os\.getenv|getenv|process\.env|env\(|env\[|!vault|vault:|lookup\(|secretkeyref|"
                r"your|example|placeholder|changeme|redacted|required|optional|none\b|null\b|nil\b|true\b|false\b|"
                r"string\b|secret\b|password\b|hidden\b|unset\b|empty\b|todo\b|tbd\b|see\b|ask\b|n/a)")

SPECS: list[tuple[str, str]] = [
    # the BEGIN line and the body after it (base64 lines, "Proc-Type: ..." headers, blank lines) up
    # to its END line, so that redaction takes the whole key (each line is one alternative: linear)
    ("private key block",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:[ \t]*(?:\r?\n|\\r?\\n)(?:[ \t]*[A-Za-z0-9+/=]{1,100}"
        r"|[A-Za-z][A-Za-z\-]{0,30}: [^\n\\]{0,100}|[ \t]*(?=\r?\n|\\n))){0,400}"
        r"(?:[ \t]*(?:\r?\n|\\r?\\n)[ \t]*-----END [A-Z0-9 ]{0,40}-----)?"),
    ("private key block", r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),  # the body's BEGIN cut off
    ("AWS access key", r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[A-Z0-9]{16}\b"),
    # written in lower (or mixed) case (no English word of 20 letters starts with these prefixes)
    ("AWS access key", r"(?i)\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[A-Z0-9]{16}\b"),
    ("AWS secret key",
        r"(?i)aws_?secret_?(?:access_?)?key\s*[:=]\s*[\"']?[A-Za-z0-9/+=]{40}\b"),
    ("Anthropic API key", r"\bsk-ant-(?:api|admin|oat)\d{2}-[A-Za-z0-9_\-]{20,}"),
    ("OpenAI API key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,200}T3BlbkFJ[A-Za-z0-9_\-]{20,}"),
    ("OpenAI API key", r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{40,}"),
    ("GitHub token", r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}\b"),
    ("GitHub fine-grained token", r"\bgithub_pat_[A-Za-z0-9_]{60,}\b"),
    ("GitLab token", r"\bglpat-[A-Za-z0-9_\-]{20,}\b"),
    ("GitLab token", r"\bgl(?:dt|rt|cbt|ptt|ft|imt|agent|oas|soat)-[A-Za-z0-9_\-]{20,}\b"),
    ("Bitbucket app password", r"\bATBB[A-Za-z0-9_\-]{28,}\b"),
    ("Slack token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    ("Slack webhook", r"https://hooks\.slack\.com/services/T[A-Za-z0-9_]+/B[A-Za-z0-9_]+/[A-Za-z0-9_]+"),
    ("Stripe key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,}\b"),
    ("Google API key", r"\bAIza[0-9A-Za-z_\-]{35}\b"),
    ("Google OAuth secret", r"\bGOCSPX-[A-Za-z0-9_\-]{28}\b"),
    ("Google service account key", r"\"private_key_id\"\s*:\s*\"[a-f0-9]{40}\""),
    ("Azure storage key", r"(?i)AccountKey=[A-Za-z0-9+/=]{80,}"),
    ("Twilio key", r"\bSK[0-9a-fA-F]{32}\b"),
    ("SendGrid key", r"\bSG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}\b"),
    ("npm token", r"\bnpm_[A-Za-z0-9]{36}\b"),
    ("PyPI token", r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}"),
    ("Hugging Face token", r"\bhf_[A-Za-z0-9]{34,}\b"),
    ("DigitalOcean token", r"\bdo[por]_v1_[a-f0-9]{64}\b"),
    ("Shopify token", r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b"),
    ("Mailgun key", r"\bkey-[0-9a-zA-Z]{32}\b"),
    ("Discord bot token", r"\b[MN][A-Za-z\d]{23,25}\.[\w-]{6}\.[\w-]{27,38}\b"),
    ("Telegram bot token", r"\b\d{8,10}:AA[A-Za-z0-9_\-]{33}\b"),
    ("JSON web token", r"\beyJ[A-Za-z0-9_\-]{8,1024}+\.eyJ[A-Za-z0-9_\-]{8,16384}+\.[A-Za-z0-9_\-]{10,}"),
    ("Google OAuth token", r"\bya29\.[A-Za-z0-9_\-]{30,}"),
    ("Google OAuth refresh token", r"\b1//0[A-Za-z0-9_\-]{40,}"),
    ("Azure AD client secret",
        r"(?<![A-Za-z0-9_~.\-])[A-Za-z0-9_~.\-]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}(?![A-Za-z0-9_~.\-])"),
    ("Azure shared access key", r"(?i)SharedAccess(?:Key|Signature)=[A-Za-z0-9+/%=]{30,}"),
    ("Azure SAS token", r"[?&]sv=\d{4}-\d{2}-\d{2}&[^\s\"']{0,1024}?\bsig=[A-Za-z0-9%+/=]{30,}"),
    ("Stripe webhook secret", r"\bwhsec_[A-Za-z0-9]{24,}\b"),
    ("Slack app token", r"\bxapp-\d-[A-Z0-9]+-\d+-[a-z0-9]{32,}\b"),
    ("Atlassian API token", r"\bATATT3[A-Za-z0-9_\-=]{100,}"),
    ("Heroku API key", r"\bHRKU-[A-Za-z0-9_\-]{40,}"),
    ("Databricks token", r"\bdapi[a-f0-9]{32}(?:-\d)?\b"),
    ("age secret key", r"\bAGE-SECRET-KEY-1[0-9A-Z]{58}\b"),
    ("HashiCorp Vault token", r"\bhv[sb]\.[A-Za-z0-9_\-]{24,}"),
    ("Doppler token", r"\bdp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}\b"),
    ("Linear API key", r"\blin_api_[A-Za-z0-9]{40}\b"),
    ("Notion token", r"\b(?:ntn_[0-9]{11}[A-Za-z0-9]{35}|secret_[A-Za-z0-9]{43})\b"),
    ("Grafana token", r"\b(?:glsa_[A-Za-z0-9]{32}_[a-fA-F0-9]{8}|glc_[A-Za-z0-9+/]{32,}={0,2})"),
    ("Sentry token", r"\bsntry?[su]?_[A-Za-z0-9+/=_\-]{40,}"),
    ("Postman API key", r"\bPMAK-[a-f0-9]{24}-[a-f0-9]{34}\b"),
    ("OpenRouter API key", r"\bsk-or-v1-[a-f0-9]{64}\b"),
    ("xAI API key", r"\bxai-[A-Za-z0-9]{70,}\b"),
    ("Groq API key", r"\bgsk_[A-Za-z0-9]{48,}\b"),
    ("Replicate token", r"\br8_[A-Za-z0-9]{37}\b"),
    ("Square token", r"\b(?:sq0atp|sq0csp)-[0-9A-Za-z_\-]{22,43}\b|\bEAAA[A-Za-z0-9_\-]{60}\b"),
    ("Cloudflare API token", r"(?i)\bcloudflare[A-Za-z0-9_]*\s*[:=]\s*[\"']?[A-Za-z0-9_\-]{40}\b"),
    ("Kubernetes client key", r"(?i)\bclient-key-data:\s*[A-Za-z0-9+/=]{40,}"),
    ("Docker registry auth", r"\"auth\"\s*:\s*\"[A-Za-z0-9+/]{16,}={0,2}\""),
    ("authorization header",
        r"(?i)\bauthorization\s*[:=]\s*[\"']?(?:basic|bearer|token)\s+(?!\$\{?|<|\*{3}|x{3})[A-Za-z0-9._~+/\-]{16,}=*"),
    ("password in URL",
        r"\b[a-zA-Z][a-zA-Z0-9+.\-]{1,20}://[^\s:/@]{0,64}:(?!\*+@|\$|<|\{\{|x{3})([^\s/@]{3,128})@[^\s/@]+"),
    # jdbc:...?user=app&password=..., ...;Password=... (connection strings)
    ("password in URL", r"(?i)[?&;](?:password|passwd|pwd)=(?!\$|<|\{\{|\*{3}|x{3}|&|;)[^\s&;\"']{4,128}"),
    ("netrc password", r"(?im)^[^\S\n]*machine\s+\S+\s+login\s+\S+\s+password\s+\S{4,}"),
    # .env and shell lines, and compose's environment (a list item "- KEY=value" or a map "KEY: value"): an
    # UPPER_CASE variable whose name says it holds a secret, any real value (not a reference or a placeholder);
    # anywhere in a line, not only at its start (a transcript line starts "USER: ")
    ("password assignment",
        r"(?<![A-Za-z0-9_$.\-])(?!(?:PGPASSWORD|MYSQL_PWD|REDISCLI_AUTH|SSHPASS)=)"  # (a command line's: below)
        r"(?:export[ \t]+|-[ \t]+)?[\"']?(?>[A-Z0-9_]*?(?:PASSWORD|PASSWD|PASSPHRASE|SECRET|TOKEN|"
        r"API_?KEY|APP_?KEY|ADMIN_?KEY|MASTER_?KEY|SIGNING_?KEY|ENCRYPTION_?KEY|LICENSE_?KEY|SERVICE_?KEY|"
        r"PRIVATE_KEY|ACCESS_KEY|AUTH_KEY|CREDENTIALS?|_PASS(?![A-Z])|_PWD?(?![A-Z])))[A-Z0-9_]*+[\"']?[ \t]*"
        r"(?:=|:(?=[ \t]))[ \t]*[\"']?(?!X{3}|" + _NOT_A_VALUE + r")[^\s\"'#]{6,}"),
    # config and prose (YAML, JSON, TOML, "password: ..."): only values that look machine-made,
    # so that "password: ask the admin" or "token: see the vault" stay allowed
    ("credential assignment",
        r"(?i)\b(?:password|passwd|passphrase|api[_-]?key|secret[_-]?key|access[_-]?token|auth[_-]?token|"
        r"client[_-]?secret|refresh[_-]?token|private[_-]?key)[\"']?\s*[:=]\s*[\"']?"
        r"(?!\$\{?|<|%|\*{3}|x{3}|your|example|placeholder)"
        r"(?=[^\s\"'\d]{0,64}\d)(?=[^\s\"'A-Za-z]{0,64}[A-Za-z])[^\s\"',;]{8,}"),
]

SPECS += [
    ("npm token", r"(?i)_auth(?:Token)?\s*=\s*[\"']?(?!\$|<|x{3})[A-Za-z0-9_\-+/.=]{20,1024}"),
    ("PyPI token", r"\bpypi-AgE[A-Za-z0-9_\-]{60,1024}"),  # PyPI and TestPyPI (pypi-AgENdGVzdC5weXBp...)
    ("Discord webhook", r"https://(?:[a-z]+\.)?discord(?:app)?\.com/api/webhooks/\d{6,256}/[A-Za-z0-9_\-]{30,1024}"),
    ("Slack webhook", r"https://hooks\.slack\.com/(?:workflows|triggers)/T[A-Za-z0-9_]+/[A-Za-z0-9_/]{10,256}"),
    ("Teams webhook", r"(?i)https://[a-z0-9\-]+\.webhook\.office\.com/webhookb2/[A-Za-z0-9\-@]{30,1024}"
                      r"/IncomingWebhook/[A-Za-z0-9]{16,256}/[A-Za-z0-9\-]{20,1024}"),
    ("Teams webhook", r"(?i)https://[a-z0-9\-.]{1,253}\.logic\.azure\.com(?::\d+)?/workflows/[A-Za-z0-9]{16,256}/"
                      r"[^\s\"']{0,200}?[?&]sig=[A-Za-z0-9%_\-]{20,1024}"),
    # passwords on command lines: mysql -pSECRET, --password=..., curl -u user:pw, sshpass -p, PGPASSWORD=... psql
    ("password on a command line", r"\bmysql(?:dump|admin|sh)?\b[^\n]{0,200}? -p[\"']?(?![\"'$<\s-])[^\s\"']{3,256}"),
    ("password on a command line",
        r"(?<![\w-])--(?:password|passwd|pass|token|api-key|secret)=[\"']?(?![\"'$<\s]|\*{3}|x{3})[^\s\"']{4,256}"),
    ("password on a command line",
        r"(?<![\w-])--(?:password|passwd|token|api-key)[ \t]+[\"']?(?=[^\s\"']{0,64}\d)(?![$<-])[^\s\"']{6,256}"),
    ("password on a command line",
        r"(?<![\w-])(?:-u|--user)[ \t=][\"']?[^\s:\"'$]{1,64}:(?![$<])(?=[^\s\"'@]{0,128}[^\d\s\"'@])"
        r"[^\s\"'@]{3,256}"),
    ("password on a command line", r"\bsshpass[ \t]+-p[ \t]*[\"']?(?![\"'$<\s])[^\s\"']{3,256}"),
    ("password on a command line", r"(?<![\w$])(?:PGPASSWORD|MYSQL_PWD|REDISCLI_AUTH|SSHPASS)="
                                   r"[\"']?(?![\"'$<\s])[^\s\"']{4,256}"),
    # YAML and TOML: a quoted value, or a block scalar, after a password key (quoted: chosen, not prose)
    ("credential assignment",
        r"(?i)(?<![\w-])(?:[a-z0-9]{1,20}[_.\-]){0,3}(?:password|passwd|pwd|passphrase|secret|api[_-]?key|token|"
        r"app[_-]?key|admin[_-]?key)[\"']?[ \t]*[:=][ \t]*"
        r"(?:\"(?![$<{%]|\*{3}|x{3}|your|example|placeholder|changeme)[^\s\"]{6,128}\""
        r"|'(?![$<{%]|\*{3}|x{3}|your|example|placeholder|changeme)[^\s']{6,128}')"),
    # YAML, compose, Ansible and Helm values (``db_password: ...``, ``POSTGRES_PASSWORD: ...``): a key named
    # for a password, and one plain value that ends the line (prose goes on after it)
    ("credential assignment",
        r"(?im)(?<![\w-])(?:[a-z0-9]{1,20}[_.\-]){0,3}(?:password|passwd|pwd|passphrase|secret|"
        r"secret[_-]?key|api[_-]?key|app[_-]?key|admin[_-]?key|access[_-]?key|auth[_-]?token|access[_-]?token|"
        r"client[_-]?secret|token)[ \t]*:[ \t]+(?!" + _NOT_A_VALUE + r")"
        r"[^\s\"'#]{6,128}[ \t]*(?:#[^\n]*)?$"),
    # Kubernetes env: ``- name: DB_PASSWORD`` and on the next line ``value: ...``
    ("credential assignment",
        r"(?im)(?<![\w-])name:[ \t]*[\"']?[a-z0-9_.\-]{0,40}?(?:password|passwd|secret|token|api_?key|"
        r"app_?key|admin_?key|credentials?)(?:_?key)?[\"']?[ \t]*\r?\n[ \t]*value:[ \t]*[\"']?"
        r"(?!" + _NOT_A_VALUE + r")[^\s\"'#]{4,256}"),
    # prose: "login: admin / <pw>", "user: deploy, pw: <pw>", "pass: <pw>": a value with a digit or a symbol.
    # Lower case or capitalised only: a transcript's "USER: " and go test's "--- PASS: TestX (0.07s)" are no label
    ("credential in prose",
        r"(?<![\w-])(?:[Ll]ogin|[Uu]ser(?:name)?|[Cc]reds?|[Aa]ccount)[ \t]*[:=][ \t]*[^\s/:,]{1,64}"
        r"(?:[ \t]*/[ \t]*|:|,[ \t]*(?:[Pp]ass(?:word)?|pw|pwd)[ \t]*[:=][ \t]*)(?!" + _NOT_A_VALUE + r")"
        r"(?=[^\s\"'`:]{0,64}[0-9!@#%^&*+=?~])[^\s\"'`,;:]{6,128}"),
    ("credential in prose",
        r"(?<![\w-])(?:[Pp]ass|pw|pword)[ \t]*[:=][ \t]*[\"'`]?(?!" + _NOT_A_VALUE + r"|-)"
        r"(?=[^\s\"'`]{0,64}[0-9!@#%^&*+=?~])[^\s\"'`,;]{6,128}"),
    ("credential assignment",
        r"(?im)^[ \t]*[\"']?(?:password|passwd|pwd|passphrase|secret|api[_-]?key|token)[\"']?[ \t]*:[ \t]*[|>][-+]?"
        r"[ \t]*\r?\n[ \t]+(?![$<{]|\*{3}|x{3})\S{6,256}"),
    # provider formats as the public rule sets document them (gitleaks, trufflehog, GitHub's secret scanning)
    ("Okta API token", r"\bSSWS[ \t]+00[A-Za-z0-9_\-]{40}\b"),
    ("Okta API token", r"(?i)\bokta[a-z0-9_.\-]{0,30}[\"']?[ \t]*[:=][ \t]*[\"']?00[A-Za-z0-9_\-]{40}\b"),
    ("New Relic key", r"\bNR(?:AK-[A-Z0-9]{27}|JS-[a-f0-9]{19}|II-[A-Za-z0-9_\-]{32}|RA-[a-f0-9]{42})\b"),
    ("Firebase Cloud Messaging server key", r"\b[A-Za-z0-9_\-]{7,11}:APA91b[A-Za-z0-9_\-]{100,200}"),
    ("JFrog token", r"\b(?:AKCp[A-Za-z0-9]{69}|cmVmd[A-Za-z0-9]{59})\b"),
    ("Alibaba access key", r"\bLTAI[A-Za-z0-9]{12,20}\b"),
    ("Tencent Cloud key", r"\bAKID[A-Za-z0-9]{32}\b"),
    ("1Password secret", r"\bA3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-"
                         r"[A-Z0-9]{5}\b"
                         r"|\bops_eyJ[A-Za-z0-9+/]{100,8192}={0,3}"),
    ("Adobe client secret", r"\bp8e-[A-Za-z0-9]{32}\b"),
    ("Airtable token", r"\bpat[A-Za-z0-9]{14}\.[a-f0-9]{64}\b"),
    ("AWS Bedrock API key", r"\bABSK[A-Za-z0-9+/]{109,269}={0,2}"),
    ("ClickHouse Cloud key", r"\b4b1d[A-Za-z0-9]{38}\b"),
    ("Clojars token", r"\bCLOJARS_[a-z0-9]{60}\b"),
    ("Cloudflare origin CA key", r"\bv1\.0-[a-f0-9]{24}-[a-f0-9]{146}\b"),
    ("Duffel token", r"\bduffel_(?:test|live)_[A-Za-z0-9_\-=]{43}"),
    ("Dynatrace token", r"\bdt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}\b"),
    ("EasyPost key", r"\bEZ[AT]K[A-Za-z0-9]{54}\b"),
    ("Facebook access token", r"\bEAA[A-Z][A-Za-z0-9]{90,1024}\b"),
    ("Flutterwave key", r"\bFLWSECK(?:_TEST)?-[a-hA-H0-9]{32}-X\b"),
    ("Fly.io token", r"\b(?:fo1_[A-Za-z0-9_\-]{43}|fm[12][ar]?_[A-Za-z0-9+/]{100,8192}={0,3})"),
    ("Frame.io token", r"\bfio-u-[A-Za-z0-9_\-=]{64}"),
    ("GitLab token", r"\b(?:glffct-[A-Za-z0-9_\-]{20}|GR1348941[A-Za-z0-9_\-]{20})"),
    ("Harness token", r"\b(?:pat|sat)\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}\b"),
    ("Terraform Cloud token", r"\b[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_\-=]{60,70}"),
    ("Hugging Face token", r"\bapi_org_[A-Za-z]{34}\b"),
    ("Infracost key", r"\bico-[A-Za-z0-9]{32}\b"),
    ("MaxMind license key", r"\b[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk\b"),
    ("Octopus Deploy key", r"\bAPI-[A-Z0-9]{26}\b"),
    ("OpenShift token", r"\bsha256~[A-Za-z0-9_\-]{43}"),
    ("Perplexity API key", r"\bpplx-[A-Za-z0-9]{48}\b"),
    ("PlanetScale token", r"\bpscale_(?:tkn|oauth|pw)_[A-Za-z0-9_=.\-]{32,64}"),
    ("Prefect key", r"\bpnu_[A-Za-z0-9]{36}\b"),
    ("Pulumi token", r"\bpul-[a-f0-9]{40}\b"),
    ("ReadMe key", r"\brdme_[a-z0-9]{70}\b"),
    ("RubyGems key", r"\brubygems_[a-f0-9]{48}\b"),
    ("Scalingo token", r"\btk-us-[A-Za-z0-9_\-]{48}"),
    ("Brevo key", r"\bx(?:keysib|smtpsib)-[a-f0-9]{64}-[A-Za-z0-9]{16}\b"),
    ("Shippo token", r"\bshippo_(?:live|test)_[a-f0-9]{40}\b"),
    ("Typeform token", r"\btfp_[A-Za-z0-9_\-.=]{59}"),
    ("Mapbox secret token", r"\bsk\.eyJ[A-Za-z0-9_\-]{20,512}\.[A-Za-z0-9_\-]{20,512}"),
    ("Dropbox token", r"\bsl\.(?:u\.)?[A-Za-z0-9_\-=]{130,1400}"),
    ("Docker Hub token", r"\bdckr_(?:pat|oat)_[A-Za-z0-9_\-]{27,64}"),
    ("NuGet key", r"\boy2[a-z0-9]{43}\b"),
    ("Figma token", r"\bfig[dou]_[A-Za-z0-9_\-]{40,64}"),
    ("Supabase key", r"\b(?:sbp_[a-f0-9]{40}|sb_secret_[A-Za-z0-9_\-]{31,64})\b"),
    ("HubSpot token", r"\bpat-(?:na|eu|ap)\d-[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}\b"),
    ("Netlify token", r"\bnf[pc]_[A-Za-z0-9]{36,40}\b"),
    ("LangSmith key", r"\blsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}\b"),
    ("Pinecone key", r"\bpcsk_[A-Za-z0-9]{4,8}_[A-Za-z0-9]{50,80}\b"),
    ("Tavily key", r"\btvly-(?:dev-|prod-)?[A-Za-z0-9]{32}\b"),
    ("NVIDIA API key", r"\bnvapi-[A-Za-z0-9_\-]{64}"),
    ("Contentful token", r"\bCFPAT-[A-Za-z0-9_\-]{43}"),
    ("Buildkite token", r"\bbkua_[a-f0-9]{40}\b"),
    ("CircleCI token", r"\bCCI(?:PAT|PRJ)_[A-Za-z0-9]{20,24}_[a-f0-9]{40}\b"),
    ("Render key", r"\brnd_[A-Za-z0-9]{32}\b"),
    ("Resend key", r"\bre_[A-Za-z0-9]{8}_[A-Za-z0-9]{24}\b"),
    ("Mailchimp key", r"\b[a-f0-9]{32}-us\d{1,2}\b"),
    ("Twitter bearer token", r"\bAAAAAAAAAAAAAAAAAAAAA[A-Za-z0-9%]{30,300}"),
    ("Braintree token", r"\baccess_token\$(?:production|sandbox)\$[a-z0-9]{16}\$[a-f0-9]{32}\b"),
    ("Amazon MWS token", r"\bamzn\.mws\.[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}\b"),
    ("Slack token", r"\bxoxe(?:\.xox[bp])?-\d-[A-Za-z0-9]{100,200}\b"),
    ("Sourcegraph token", r"\bsgp_(?:[a-f0-9]{16}_)?[a-f0-9]{40}\b"),
    ("Plaid token", r"\baccess-(?:sandbox|development|production)-[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}"
                    r"-[a-f0-9]{12}\b"),
    ("Asana token", r"\b[0-9]/[0-9]{10,20}(?:/[0-9]{10,20})?:[a-f0-9]{32}\b"),
    ("Telnyx key", r"\bKEY[0-9A-F]{32}_[A-Za-z0-9]{22}\b"),
    ("Adafruit IO key", r"\baio_[A-Za-z]{4}[0-9]{2}[A-Za-z0-9]{22}\b"),
    ("Cerebras API key", r"\bcsk-[a-z0-9]{48}\b"),
    ("ElevenLabs key", r"\bsk_[a-f0-9]{48}\b"),
    ("payment provider key", r"\b(?:live|test)_(?=[A-Za-z]{0,39}[0-9])[A-Za-z0-9]{30,40}\b"),  # Mollie, Lob, GoCardless
    ("Scaleway key", r"\bSCW[A-Z0-9]{17}\b"),
    ("Deno Deploy token", r"\bdd[pw]_[A-Za-z0-9]{36}\b"),
    ("Azure DevOps token", r"(?i)\b(?:azure[_-]?devops|ado|vsts)[a-z0-9_]{0,20}[\"']?[ \t]*[:=][ \t]*[\"']?"
                           r"[a-z2-7]{52}\b"),
    ("Datadog key", r"(?i)\b(?:dd|datadog)_(?:api|app)_?key[\"']?[ \t]*[:=][ \t]*[\"']?[a-f0-9]{32,40}\b"),
    # a provider prefix, then a key body grouped or joined by a dash (AKIA-..., AKIA IOSF ODNN ...)
    ("AWS access key", r"\b(?:AKIA|ASIA|ABIA|ACCA)(?:[ \-_.]{1,2}[A-Z0-9]{4}){4}\b"),
    ("AWS access key", r"\b(?:AKIA|ASIA|ABIA|ACCA)[\-_.][A-Z0-9]{16}\b"),
    # a key cut where a transcript's tool result is cut ("[…123 more chars]"): its first part is a secret
    ("cut token",
        r"(?<![A-Za-z0-9_\-.])(?:gh[pousr]_|github_pat_|glpat-|xox[abposr]-|sk-ant-|sk-proj-|sk_live_|rk_live_|npm_|"
        r"hf_|AIza|AKIA|ASIA|pypi-AgE|SG\.|dop_v1_|shpat_|whsec_|gsk_|eyJ)(?:[A-Za-z0-9_\-]{6,1024}+"
        r" ?\[(?:…|\.\.\.)\d{1,12} more chars\]|[A-Za-z0-9_\-]{16,1024}+(?:…|\.\.\.))"),
]

PII_SPECS: list[tuple[str, str]] = [
    ("e-mail address", r"\b[A-Za-z0-9._%+\-]{1,64}@[A-Za-z0-9.\-]{1,255}\.[A-Za-z]{2,63}\b"),
    ("phone number", r"(?<![\w.])\+?\d{1,3}[\s.\-]?\(?\d{2,4}\)?[\s.\-]\d{3,4}[\s.\-]\d{3,4}(?!\w|\.\d)"),
]

EMAIL_OK = re.compile(r"@(?:example\.(?:com|org|net)|users\.noreply\.github\.com|anthropic\.com)$", re.I)

# Keys the providers print in their own documentation (AWS's ...EXAMPLE ids and ...EXAMPLEKEY secrets,
# jwt.io's sample token, Stripe's docs keys): memory that quotes them is no leak.
_DOCS_KEYS = ("EXAMPLEKEY", "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c", "4eC39HqLyjWDarjtT1zdp7dc",
              "BQokikJOvBiI2HlWgH4olfQ2", "TYooMQauvdEDq54NiTphI7jx")
_FILLERS = ("XXXXXXXX", "xxxxxxxx", "********", "00000000", "........", "<your", "<YOUR", "your-", "YOUR_",
            "changeme", "REDACTED", "redacted", "Redacted")


def harmless(found: str, kind: str = "") -> bool:
    """A match that is a documentation example or a placeholder, not a secret: a provider's docs key,
    an AWS key id ending in EXAMPLE, a body of filler (``ghp_XXXXXXXX...``, ``AKIA0000...``, ``<your-``,
    ``[REDACTED]``), or a value elided with an ellipsis (``sk-ant-...``; a key cut where a transcript cuts
    a tool result is the "cut token" rule's, and counts)."""
    if found.endswith("EXAMPLE") or any(k in found for k in _DOCS_KEYS):
        return True
    if kind != "cut token" and ("..." in found or "…" in found):
        return True
    if found.rstrip("\"'`").endswith(("xxxx", "XXXX")):
        return True  # a filler tail: github_pat_xxxx
    return any(f in found for f in _FILLERS)


_COMPILED: dict[str, re.Pattern[str]] = {}


def compiled(pattern: str) -> re.Pattern[str]:
    """The rule's regex, compiled on first use and kept for the process (compiling all 60+ rules
    costs ~5 ms; ``memd.core.fastscan`` compiles only those a text can match)."""
    rx = _COMPILED.get(pattern)
    if rx is None:
        rx = _COMPILED[pattern] = re.compile(pattern)
    return rx


def specs(strict: bool = False, pii: bool = True) -> list[tuple[str, str]]:
    """The (kind, pattern) rules in order: the secret rules, and with strict and pii the personal-data rules."""
    return SPECS + PII_SPECS if strict and pii else SPECS


def rules(strict: bool = False, pii: bool = True) -> list[tuple[str, re.Pattern[str]]]:
    """``specs`` compiled, in order."""
    return [(kind, compiled(p)) for kind, p in specs(strict, pii)]


Span = tuple[str, int, int]  # (kind, start, end) of a secret in a text
NAMED_KINDS = frozenset({"password assignment", "credential assignment", "credential in prose"})


def collect_spans(text: str, ruleset: Iterable[tuple[str, re.Pattern[str]]]) -> list[Span]:
    """The matches of ruleset (in order, the ``NAMED_KINDS`` last) over text as (kind, start, end): a span
    whose start an earlier rule already claimed is not reported again, nor a named value's span that
    overlaps one; allowed e-mail domains are skipped; sorted by position."""
    spans: list[Span] = []  # sorted by start: what earlier rules claimed
    # the rules that judge a value by its name run last, and a match of theirs that overlaps a provider's is
    # left to it: "token: ghp_…" is a GitHub token, not a credential assignment
    ordered = sorted(ruleset, key=lambda r: r[0] in NAMED_KINDS)
    for kind, rx in ordered:
        named = kind in NAMED_KINDS
        new: list[Span] = []
        j, reach = 0, -1  # spans[:j] start at or before the match; reach: the furthest end among them
        for m in rx.finditer(text):
            if kind == "e-mail address" and EMAIL_OK.search(m.group(0)):
                continue
            if harmless(m.group(0), kind):
                continue
            start = m.start()
            while j < len(spans) and spans[j][1] <= start:
                reach = max(reach, spans[j][2])
                j += 1
            if start < reach or (named and j < len(spans) and spans[j][1] < m.end()):
                continue
            new.append((kind, start, m.end()))
        if new:
            spans = sorted(spans + new, key=lambda s: s[1])  # (both sorted: timsort merges them)
    spans.sort(key=lambda s: (s[1], s[2]))
    return spans


def collect(text: str, ruleset: Iterable[tuple[str, re.Pattern[str]]]) -> list[SecretHit]:
    """``collect_spans`` as hits (kind, line, column)."""
    return hits_of(text, collect_spans(text, ruleset))


def hits_of(text: str, spans: Iterable[Span]) -> list[SecretHit]:
    """The spans as hits (kind, line, column of their start), in the spans' order. Linear in the text
    and the spans together: lines are counted from the previous start forward (counting from the
    text's start for every hit made a text dense with keys quadratic: 1 MB of key ids took 47 s)."""
    out: list[SecretHit] = []
    at, line, line_start = 0, 1, 0  # the offset counted up to, its line, where that line starts
    for kind, start, _ in spans:
        if start < at:  # out of order (callers pass sorted spans): count this one from the start
            at, line, line_start = 0, 1, 0
        line += text.count("\n", at, start)
        nl = text.rfind("\n", at, start)
        if nl >= 0:
            line_start = nl + 1
        at = start
        out.append(SecretHit(kind, line, start - line_start + 1))
    return out

