"""``memd.core.secrets.scan``, fast enough to run over a thousand memory folders.

Each rule's regex source says two things about every match, read once per process: how long a
whitespace-free run it holds (``solid_length``: an AWS key is 20 characters without a space) and
its "needles", literal strings it must contain (``pattern_needles``; a rule added to secret_rules.py
gets both, or, when its shape is not plain enough, simply always runs). A text first rules out
every rule whose run is longer than the text's longest one (prose rules out most), then every
rule missing a needle (a few ``in`` tests, the one-needle sets first, each needle tested once per
text); a regex that starts with ``\\b`` gets no literal-prefix speed-up from the re module, so
this makes scanning prose about ten times cheaper. Only the rules left are compiled (on first
use, kept for the process) and run. The hits are exactly those of ``secrets.scan_all`` (tests compare
the two, on samples and on strings generated from every rule).
"""

from __future__ import annotations

import re
from itertools import pairwise

from memd.core import secret_rules
from memd.core.secret_rules import SecretHit, Span

Needles = tuple[frozenset[str], ...]  # every set must have a member in the text (AND of ORs)
FactNeedles = tuple[tuple[str, ...], ...]  # the same as FACTS holds them (a literal: tuples)
_IGNORECASE = int(re.IGNORECASE)  # (an int: RegexFlag's operators run in Python)

_CLASS_ESCAPES = frozenset("dDwWsSbBAZ")  # one-character escapes that stand for a class or a position
_QUANT = "?*{"  # after a literal: that literal may be absent (or repeated a number of times that may be 0)
MAX_PRODUCT = 64  # literal alternatives combined with their neighbours before giving up on the product


def fold(text: str) -> str:
    folded = text.casefold()
    # dotless i: re's IGNORECASE matches it with "i", and casefold keeps it
    return folded.replace("\u0131", "i") if "\u0131" in folded else folded


def _level(p: str, start: int) -> tuple[list[int], int]:
    """Walk p from start, skipping escapes, character classes and nested groups: (the indexes of
    the "|" at start's own level, the index of the ")" that closes that level, or -1)."""
    bars: list[int] = []
    depth, j = 0, start
    while j < len(p):
        ch = p[j]
        if ch == "\\":
            j += 2
            continue
        if ch == "[":
            j = _class_end(p, j)
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                return bars, j
            depth -= 1
        elif ch == "|" and depth == 0:
            bars.append(j)
        j += 1
    return bars, -1


def _group_end(p: str, i: int) -> int:
    """Index just past the group that opens at p[i], or -1."""
    close = _level(p, i + 1)[1]
    return close + 1 if close >= 0 else -1


def _class_end(p: str, i: int) -> int:
    """Index just past the character class that opens at p[i]."""
    j = i + 1
    if j < len(p) and p[j] == "^":
        j += 1
    if j < len(p) and p[j] == "]":
        j += 1  # a "]" first in a class is a literal
    while j < len(p) and p[j] != "]":
        j += 2 if p[j] == "\\" else 1
    return j + 1


def _split_alternatives(body: str) -> list[str]:
    """body split at its top-level "|" (a balanced pattern, as a valid regex's is)."""
    cuts = [-1, *_level(body, 0)[0], len(body)]
    return [body[a + 1:b] for a, b in pairwise(cuts)]


def _literal_prefix(p: str) -> tuple[str, bool]:
    """(the literal text p starts with, whether p is nothing but that text)."""
    out: list[str] = []
    i = 0
    while i < len(p):
        ch = p[i]
        if ch == "\\" and i + 1 < len(p) and not p[i + 1].isalnum():
            out.append(p[i + 1])
            i += 2
        elif ch in ".^$*+?{}[]\\|()":
            break
        else:
            out.append(ch)
            i += 1
        if i < len(p) and p[i] in _QUANT:
            out.pop()
            return "".join(out), False
    return "".join(out), i == len(p)


def _sequence(p: str) -> list[frozenset[str]] | None:
    """Needle sets of one alternative-free sequence, each required on its own; None if unreadable."""
    cands: list[frozenset[str]] = []
    run = [""]

    def close() -> None:
        nonlocal run
        if all(run):
            cands.append(frozenset(run))
        run = [""]

    def literal(ch: str, after: int) -> None:
        nonlocal run
        run = [r + ch for r in run]
        if after < len(p) and p[after] in _QUANT:
            run = [r[:-1] for r in run]
            close()

    i = 0
    while i < len(p):
        ch = p[i]
        if ch == "\\":
            if i + 1 < len(p) and not p[i + 1].isalnum():
                literal(p[i + 1], i + 2)
            elif i + 1 < len(p) and p[i + 1] in _CLASS_ESCAPES:
                close()  # \b, \d, \s...: not literal text
            else:
                return None  # \x41, \u00e9, \1...: longer escapes are not read here
            i += 2
        elif ch == "(":
            end = _group_end(p, i)
            if end < 0:
                return None
            optional = end < len(p) and p[end] in _QUANT
            if p.startswith(("(?:", "(?>"), i) and not optional:  # non-capturing or atomic: same literals
                alts = [_literal_prefix(a) for a in _split_alternatives(p[i + 3:end - 1])]
                if len(run) * len(alts) > MAX_PRODUCT:
                    close()
                run = [r + a for r in run for a, _ in alts]
                if not all(whole for _, whole in alts):
                    close()  # some alternative goes on with more than literal text
            else:
                close()  # optional, capturing, lookaround or flagged groups: skipped
            i = end
        elif ch == "[":
            close()
            i = _class_end(p, i)
        elif ch == "{":
            close()
            j = p.find("}", i)
            i = j + 1 if j > 0 else len(p)
        elif ch in ".^$?*+)":
            close()
            i += 1
        elif ch == "|":
            return None
        else:
            literal(ch, i + 1)
            i += 1
    close()
    return cands


def _common(needle: str) -> bool:
    return len(needle) < 2 and (needle.isalnum() or needle in " .,-:;\n")


def _score(s: frozenset[str]) -> tuple[int, int]:
    return (min(map(len, s)), -len(s))


def pattern_needles(pattern: str, flags: int = 0) -> Needles | None:
    """Needles of a regex: sets of literals, each set holding a string every match contains.
    None when nothing reliable can be read (the rule must then always run)."""
    if flags & re.VERBOSE:
        return None
    body = pattern
    m = re.match(r"\(\?[aiLmsux]+\)", body)
    if m:
        body = body[m.end():]
    alts = _split_alternatives(body)
    if len(alts) > 1:
        union: set[str] = set()
        for a in alts:
            c = _sequence(a)
            if not c:
                return None
            best: frozenset[str] = max(c, key=_score)
            union.update(best)
        needles: Needles = (frozenset(union),)
    else:
        c = _sequence(body)
        if not c:
            return None
        needles = tuple(sorted(c, key=_score, reverse=True)[:3])
    if flags & re.IGNORECASE:
        needles = tuple(frozenset(fold(n) for n in s) for s in needles)
    needles = tuple(s for s in needles if not all(_common(n) for n in s))  # "." is everywhere: no test
    return needles or None


_QUANT_RX = re.compile(r"\?|\*|\+|\{(\d*)(?:,\d*)?\}")


def _class_is_solid(body: str) -> bool:
    """True when the character class (its text between the brackets) can never match whitespace."""
    negated = body.startswith("^")
    if negated:
        return "\\s" in body  # [^\s...]: everything but whitespace (and more)
    if "\\s" in body or " " in body or "\\t" in body or "\\n" in body or "\\r" in body or "\\f" in body \
            or "\\v" in body or "\\W" in body or "\\D" in body or "\\S" in body or "\\x" in body \
            or "\\u" in body or "\\N" in body or "\\p" in body:
        return False
    i = 0
    while i < len(body):  # a range spanning a whitespace character (" -~") could match one
        if body[i] == "\\":
            i += 2
            continue
        if i + 2 < len(body) and body[i + 1] == "-" and body[i] <= " " <= body[i + 2]:
            return False
        if not body[i].isprintable() or body[i].isspace():
            return False
        i += 1
    return True


def solid_length(pattern: str, flags: int = 0) -> int:
    """The length of whitespace-free text every match must contain (0 when unknown): a match of
    ``\\b[MN][A-Za-z\\d]{23,25}\\.[\\w-]{6}\\.[\\w-]{27,38}`` holds a 58-character token."""
    if flags & re.VERBOSE:
        return 0
    p = pattern
    m = re.match(r"\(\?[aiLmsux]+\)", p)
    i = m.end() if m else 0
    best = cur = 0
    while i < len(p):
        ch = p[i]
        solid: bool
        if ch == "|":
            return 0
        if ch == "\\":
            nxt = p[i + 1] if i + 1 < len(p) else ""
            i += 2
            if nxt in ("b", "B", "A", "Z"):
                continue  # zero-width
            if nxt.isalnum() and nxt not in _CLASS_ESCAPES:
                return 0  # \x41, \u00e9, \1...: longer escapes are not read here
            solid = nxt in ("d", "w") or (not nxt.isalnum() and not nxt.isspace())
        elif ch == "[":
            end = _class_end(p, i)
            solid = _class_is_solid(p[i + 1:end - 1])
            i = end
        elif ch == "(":
            end = _group_end(p, i)
            if end < 0:
                return 0
            i = end
            solid = False  # groups are not looked into
        elif ch in "^$":
            i += 1
            continue
        elif ch in ".)":
            i += 1
            solid = False
        else:
            i += 1
            solid = not ch.isspace() and ch not in "?*+{}"
        q = _QUANT_RX.match(p, i)
        count = 1
        if q:
            i = q.end()
            if q.group(0) in ("?", "*"):
                count = 0
            elif q.group(0).startswith("{"):
                count = int(q.group(1) or 0)
            if i < len(p) and p[i] in "?+":
                i += 1  # lazy or possessive
        if solid:
            cur += count
            best = max(best, cur)
        else:
            cur = 0
    return best


class Rule:
    """One secret rule with what its regex's source says about every match; the regex itself is
    compiled on first use (most rules never run on a given folder)."""

    __slots__ = ("_needles", "flags", "folded", "kind", "pattern", "solid")

    def __init__(self, kind: str, pattern: str) -> None:
        self.kind = kind
        self.pattern = pattern
        known = FACTS.get(pattern_key(pattern))
        # needles: read on first use (most texts rule a rule out by solid), or known already
        self._needles: Needles | FactNeedles | bool | None = False
        if known is None:
            self.flags = int(_inline_flags(pattern))
            self.solid = solid_length(pattern, self.flags)  # every match holds a whitespace-free run this long
        else:
            self.flags, self.solid, self._needles = known
        self.folded = bool(self.flags & _IGNORECASE)  # needles are tested against the case-folded text

    @property
    def needles(self) -> Needles | FactNeedles | None:
        got = self._needles
        if got is False:
            got = self._needles = sorted_needles(self.pattern, self.flags)
        assert got is not True
        return got

    @property
    def rx(self) -> re.Pattern[str]:
        return secret_rules.compiled(self.pattern)


def sorted_needles(pattern: str, flags: int) -> Needles | None:
    """``pattern_needles``, one-needle sets first: one test can rule the rule out ("=" for .env lines)."""
    got = pattern_needles(pattern, flags)
    return None if got is None else tuple(sorted(got, key=lambda alts: len(alts) > 1))


def rule_facts(pattern: str) -> tuple[int, int, FactNeedles | None]:
    """What a rule's source says (its inline flags, ``solid_length``, ``sorted_needles``), as ``FACTS``
    holds it."""
    flags = int(_inline_flags(pattern))
    needles = sorted_needles(pattern, flags)
    return flags, solid_length(pattern, flags), None if needles is None else tuple(tuple(sorted(a)) for a in needles)


def pattern_key(pattern: str) -> int:
    """A fingerprint of a pattern's text (positional: ``{16}`` and ``{61}`` differ), cheap enough for
    every hook run: the key of ``FACTS``."""
    return int.from_bytes(pattern.encode("utf-8"), "little") % 2305843009213693951  # 2**61 - 1


# rule_facts of every rule in secret_rules, by pattern_key: parsing 60+ patterns cost each hook run that
# scans a memory write several ms. A rule missing here (added or edited since) is parsed at run time, so a
# stale table costs time, never a finding; tests/test_hook_fastpaths.py holds it current.
FACTS: dict[int, tuple[int, int, FactNeedles | None]] = {
    53761190435648192: (0, 10, (('-----BEGIN ',), ('PRIVATE KEY',), ('-----',))),
    1000210776214332003: (0, 8, (('PRIVATE KEY',), ('-----END ',), ('-----',))),
    776168020569481148: (0,
                         16,
                         (('ABIA',
                           'ACCA',
                           'AGPA',
                           'AIDA',
                           'AIPA',
                           'AKIA',
                           'ANPA',
                           'ANVA',
                           'APKA',
                           'AROA',
                           'ASIA'),)),
    1157389629944841414: (2,
                          16,
                          (('abia',
                            'acca',
                            'agpa',
                            'aida',
                            'aipa',
                            'akia',
                            'anpa',
                            'anva',
                            'apka',
                            'aroa',
                            'asia'),)),
    2048231116858698819: (2, 40, (('secret',), ('aws',), ('key',))),
    2263828889426311659: (0, 23, (('sk-ant-admin', 'sk-ant-api', 'sk-ant-oat'),)),
    1161035125979210192: (0, 48, (('T3BlbkFJ',), ('sk-',))),
    1385075471268538072: (0, 41, (('sk-admin-', 'sk-proj-', 'sk-svcacct-'),)),
    1166398761352662577: (0, 37, (('gho_', 'ghp_', 'ghr_', 'ghs_', 'ghu_'),)),
    1424799870895652038: (0, 71, (('github_pat_',),)),
    1161326769831680230: (0, 26, (('glpat-',),)),
    1325636237900884093: (0,
                          21,
                          (('glagent-',
                            'glcbt-',
                            'gldt-',
                            'glft-',
                            'glimt-',
                            'gloas-',
                            'glptt-',
                            'glrt-',
                            'glsoat-'),)),
    1788321491001820652: (0, 32, (('ATBB',),)),
    1359881832356955049: (0, 15, (('xox',),)),
    457402683920522486: (0, 40, (('https://hooks.slack.com/services/T',), ('/B',), ('/',))),
    396643185162282531: (0, 21, (('rk_live_', 'rk_test_', 'sk_live_', 'sk_test_'),)),
    1086294548812332190: (0, 39, (('AIza',),)),
    74161945511324892: (0, 35, (('GOCSPX-',),)),
    1015851151891892940: (0, 42, (('"private_key_id"',), ('"',))),
    460620872638609544: (2, 91, (('accountkey=',),)),
    1447760342755138116: (0, 34, (('SK',),)),
    70331034924176893: (0, 69, (('SG.',),)),
    242071282040441621: (0, 40, (('npm_',),)),
    106486850914403996: (0, 70, (('pypi-AgEIcHlwaS5vcmc',),)),
    1126432269194513413: (0, 37, (('hf_',),)),
    799708496791367995: (0, 71, (('_v1_',), ('do',))),
    1628627020138047148: (0, 33, (('shpat_', 'shpca_', 'shppa_', 'shpss_'),)),
    1899490549972599580: (0, 36, (('key-',),)),
    1591253256786944841: (0, 59, None),
    281692244944716015: (0, 44, ((':AA',),)),
    1017066509671792064: (0, 34, (('.eyJ',), ('eyJ',))),
    1226368422939072744: (0, 35, (('ya29.',),)),
    1644327163678442988: (0, 44, (('1//0',),)),
    286918935392539661: (0, 37, (('Q~',),)),
    1436374494822768835: (2, 31, (('sharedaccesskey=', 'sharedaccesssignature='),)),
    2043742718372512450: (0, 49, (('sig=',), ('sv=',))),
    1027345306942206333: (0, 30, (('whsec_',),)),
    624747580150220841: (0, 43, (('xapp-',),)),
    1042025842514467704: (0, 106, (('ATATT3',),)),
    1283523702111859474: (0, 45, (('HRKU-',),)),
    1459626486314382108: (0, 36, (('dapi',),)),
    1785187312296196684: (0, 74, (('AGE-SECRET-KEY-1',),)),
    1424640429633235588: (0, 28, (('hv',),)),
    1156989828352668023: (0, 41, (('dp.audit.', 'dp.ct.', 'dp.pt.', 'dp.sa.', 'dp.scim.', 'dp.st.'),)),
    615594739882555027: (0, 48, (('lin_api_',),)),
    1395390131536698016: (0, 0, (('ntn_', 'secret_'),)),
    2000289071340761706: (0, 0, (('glc_', 'glsa_'),)),
    1151597194119685806: (0, 45, (('sntr',), ('_',))),
    708861952479134373: (0, 64, (('PMAK-',),)),
    1148672816056106514: (0, 73, (('sk-or-v1-',),)),
    136229794993015769: (0, 74, (('xai-',),)),
    136284788042566617: (0, 52, (('gsk_',),)),
    1667277452187683844: (0, 40, (('r8_',),)),
    1819503755752371648: (0, 0, (('EAAA', 'sq0atp-', 'sq0csp-'),)),
    964020543415424373: (2, 40, (('cloudflare',),)),
    2104088986679578633: (2, 40, (('client-key-data:',),)),
    633437586763277046: (0, 18, (('"auth"',), ('"',))),
    2005610958926042838: (2, 16, (('authorization',), ('basic', 'bearer', 'token'))),
    1686694629712518429: (0, 6, (('://',), ('@',))),
    1118829231944691309: (2, 4, (('passwd=', 'password=', 'pwd='),)),
    1114945483471724315: (10, 8, (('password',), ('machine',), ('login',))),
    949806689880301969: (0, 6, ((':', '='),)),
    1717142605031158326: (2,
                          8,
                          (('access',
                            'api',
                            'auth',
                            'client',
                            'passphrase',
                            'passwd',
                            'password',
                            'private',
                            'refresh',
                            'secret'),)),
    682783767135920587: (2, 20, (('_auth',), ('=',))),
    2013026575163553310: (0, 68, (('pypi-AgE',),)),
    1285739847505242607: (0, 55, (('.com/api/webhooks/',), ('https://',), ('discord',))),
    992184980480771485: (0,
                         24,
                         (('/',), ('https://hooks.slack.com/triggers/T', 'https://hooks.slack.com/workflows/T'))),
    2232857354012535768: (2, 123, (('.webhook.office.com/webhookb2/',), ('/incomingwebhook/',), ('https://',))),
    661509774554180786: (2, 53, (('.logic.azure.com',), ('/workflows/',), ('https://',))),
    1907193965190540321: (0, 5, (('mysql',), (' -p',))),
    258360395385373743: (0, 4, (('--api-key=', '--pass=', '--passwd=', '--password=', '--secret=', '--token='),)),
    256588818485932160: (0, 6, (('--api-key', '--passwd', '--password', '--token'),)),
    2107080580211311477: (0, 3, (('--user', '-u'),)),
    848215401602584211: (0, 7, (('sshpass',), ('-p',))),
    2096698394437966123: (0, 4, (('MYSQL_PWD=', 'PGPASSWORD=', 'REDISCLI_AUTH=', 'SSHPASS='),)),
    390006303525462273: (2,
                         1,
                         (('admin', 'api', 'app', 'passphrase', 'passwd', 'password', 'pwd', 'secret', 'token'),
                          ('"', "'"))),
    941013288621740111: (10,
                         6,
                         (('access',
                           'admin',
                           'api',
                           'app',
                           'auth',
                           'client',
                           'passphrase',
                           'passwd',
                           'password',
                           'pwd',
                           'secret',
                           'token'),)),
    1306861801956420679: (10, 0, None),
    183849715646398022: (0, 6, None),
    1996071233623333696: (0, 6, None),
    646060386060384733: (10, 0, None),
    1651108154713577170: (0, 42, (('SSWS',), ('00',))),
    381383629608745730: (2, 42, (('okta',), ('00',))),
    2084945519978083870: (0, 2, (('NRAK-', 'NRII-', 'NRJS-', 'NRRA-'),)),
    1373606579192064184: (0, 114, ((':APA91b',),)),
    113439915950767380: (0, 0, (('AKCp', 'cmVmd'),)),
    1644192230417286158: (0, 16, (('LTAI',),)),
    242041435688995605: (0, 36, (('AKID',),)),
    570419471715471398: (0, 0, (('A3-', 'ops_eyJ'),)),
    242016266864954133: (0, 36, (('p8e-',),)),
    328996520630643247: (0, 82, (('pat',),)),
    1875562868969538991: (0, 113, (('ABSK',),)),
    242076523809344277: (0, 42, (('4b1d',),)),
    1361327095895403526: (0, 68, (('CLOJARS_',),)),
    1317060821584591786: (0, 176, (('v1.0-',),)),
    2203132124509271099: (0, 44, (('duffel_live_', 'duffel_test_'),)),
    1371436935519657860: (0, 96, (('dt0c01.',),)),
    2003163968266322383: (0, 58, (('EZ',),)),
    2280347937178307134: (0, 94, (('EAA',),)),
    648564890122302594: (0, 35, (('FLWSECK',), ('-X',))),
    1105202887570361270: (0, 0, (('fm', 'fo1_'),)),
    618651016208262520: (0, 70, (('fio-u-',),)),
    1700325236002455300: (0, 0, (('GR1348941', 'glffct-'),)),
    2146397793962668434: (0, 69, (('pat.', 'sat.'),)),
    970834975679877860: (0, 83, (('.atlasv1.',),)),
    1484355954732678375: (0, 42, (('api_org_',),)),
    242016310535588629: (0, 36, (('ico-',),)),
    1943383587920025300: (0, 40, (('_mmk',), ('_',))),
    1528434598346981714: (0, 30, (('API-',),)),
    2228037493111911266: (0, 50, (('sha256~',),)),
    2004268842273545078: (0, 53, (('pplx-',),)),
    117725764888262123: (0, 33, (('pscale_oauth_', 'pscale_pw_', 'pscale_tkn_'),)),
    242071316366756629: (0, 40, (('pnu_',),)),
    375513244687851476: (0, 44, (('pul-',),)),
    1605893280033135429: (0, 75, (('rdme_',),)),
    569407987173363148: (0, 57, (('rubygems_',),)),
    1160850698572081386: (0, 54, (('tk-us-',),)),
    562607533943942921: (0, 82, (('xkeysib-', 'xsmtpsib-'),)),
    965627467121807069: (0, 41, (('shippo_live_', 'shippo_test_'),)),
    692484025453952511: (0, 63, (('tfp_',),)),
    1299457617189342654: (0, 47, (('sk.eyJ',),)),
    812904056248424802: (0, 130, (('sl.',),)),
    470586796868828576: (0, 28, (('dckr_oat_', 'dckr_pat_'),)),
    505870028570101114: (0, 46, (('oy2',),)),
    1853772335123176333: (0, 45, (('fig',), ('_',))),
    1645941597830265617: (0, 0, (('sb_secret_', 'sbp_'),)),
    472954763676312577: (0, 38, (('pat-ap', 'pat-eu', 'pat-na'),)),
    2043542128438866381: (0, 40, (('nf',), ('_',))),
    835882047363265893: (0, 44, (('_',), ('lsv2_pt_', 'lsv2_sk_'))),
    1985968155734229134: (0, 60, (('pcsk_',), ('_',))),
    218273849867517752: (0, 32, (('tvly-',),)),
    1158030674769289454: (0, 70, (('nvapi-',),)),
    1152067949389291242: (0, 49, (('CFPAT-',),)),
    1605888916452268677: (0, 45, (('bkua_',),)),
    45718418726580279: (0, 62, (('_',), ('CCIPAT_', 'CCIPRJ_'))),
    242071239057476373: (0, 36, (('rnd_',),)),
    2077175256128779886: (0, 36, (('re_',), ('_',))),
    227251589437596157: (0, 36, (('-us',),)),
    2275213169601407957: (0, 51, (('AAAAAAAAAAAAAAAAAAAAA',),)),
    618485706810403383: (0, 50, (('$',), ('access_token$production$', 'access_token$sandbox$'))),
    1859138000949380156: (0, 45, (('amzn.mws.',),)),
    1416185571972300738: (0, 103, (('xoxe',),)),
    822446305747369934: (0, 40, (('sgp_',),)),
    1917624781925677346: (0, 37, (('access-development-', 'access-production-', 'access-sandbox-'),)),
    324886597073077429: (0, 33, (('/',),)),
    2024785899764978415: (0, 58, (('KEY',), ('_',))),
    141867487392912308: (0, 32, (('aio_',),)),
    375513240358519252: (0, 52, (('csk-',),)),
    1082330973912433883: (0, 51, (('sk_',),)),
    1172025364888921809: (0, 30, (('live_', 'test_'),)),
    490107587880289403: (0, 20, (('SCW',),)),
    2048955329198113391: (0, 40, (('dd',), ('_',))),
    1982936878346526741: (2, 52, (('ado', 'azure', 'vsts'),)),
    1152213676807821273: (2, 32, (('key',), ('datadog_api', 'datadog_app', 'dd_api', 'dd_app'))),
    686443911406919027: (0, 0, (('ABIA', 'ACCA', 'AKIA', 'ASIA'),)),
    1449837485212941021: (0, 17, (('ABIA', 'ACCA', 'AKIA', 'ASIA'),)),
    1961679997698415275: (0,
                          0,
                          (('AIza',
                            'AKIA',
                            'ASIA',
                            'SG.',
                            'dop_v1_',
                            'eyJ',
                            'gh',
                            'github_pat_',
                            'glpat-',
                            'gsk_',
                            'hf_',
                            'npm_',
                            'pypi-AgE',
                            'rk_live_',
                            'shpat_',
                            'sk-ant-',
                            'sk-proj-',
                            'sk_live_',
                            'whsec_',
                            'xox'),)),
    1393708498392169953: (0, 6, (('@',),)),
    81326263324473928: (0, 3, None),
}

_FLAG_LETTERS = {"a": re.ASCII, "i": re.IGNORECASE, "L": re.LOCALE, "m": re.MULTILINE, "s": re.DOTALL,
                 "u": re.UNICODE, "x": re.VERBOSE}


def _inline_flags(pattern: str) -> int:
    """The flags a pattern sets for itself with a leading ``(?imx)`` (the rules use no others)."""
    if not pattern.startswith("(?"):
        return 0
    m = re.match(r"\(\?([aiLmsux]+)\)", pattern)
    out = 0
    for ch in m.group(1) if m else "":
        out |= _FLAG_LETTERS[ch]
    return out


_BY_PATTERN: dict[tuple[str, str], Rule] = {}


def _rule(kind: str, pattern: str) -> Rule:
    got = _BY_PATTERN.get((kind, pattern))
    if got is None:
        got = _BY_PATTERN[(kind, pattern)] = Rule(kind, pattern)
    return got


class RuleSet:
    """Rules in their order, grouped by how long a whitespace-free run each needs."""

    __slots__ = ("_eligible", "rules")

    def __init__(self, rules: tuple[Rule, ...]) -> None:
        self.rules = rules
        self._eligible: dict[int, tuple[Rule, ...]] = {}

    def eligible(self, longest: int) -> tuple[Rule, ...]:
        """The rules (in order) whose matches fit in a text whose longest whitespace-free run is longest."""
        got = self._eligible.get(longest)
        if got is None:
            got = self._eligible[longest] = tuple(r for r in self.rules if r.solid <= longest)
        return got


_PREPARED: dict[tuple[int, bool], RuleSet] = {}


def ruleset(strict: bool = False, pii: bool = True) -> RuleSet:
    specs = secret_rules.specs(strict, pii)
    key = (len(specs), strict and pii)
    got = _PREPARED.get(key)
    if got is None:
        got = _PREPARED[key] = RuleSet(tuple(_rule(kind, p) for kind, p in specs))
    return got


def active(rs: RuleSet, text: str, longest: int | None = None) -> list[Rule]:
    """The rules of rs that can match text, in their order: those whose whitespace-free run fits in
    the text's longest one (``longest``, when the caller has it) and whose needles the text holds."""
    if longest is None:
        longest = max(map(len, text.split()), default=0)
    out: list[Rule] = []
    seen: dict[str, bool] = {}  # needle -> in the text (folded needles are keyed with a leading NUL)
    low: str | None = None
    for r in rs.eligible(longest):
        needles = r.needles
        if needles is None:
            out.append(r)
            continue
        if r.folded:
            if low is None:
                low = fold(text)
            hay, mark = low, "\0"
        else:
            hay, mark = text, ""
        for alts in needles:
            for n in alts:
                k = mark + n
                hit = seen.get(k)
                if hit is None:
                    hit = seen[k] = n in hay
                if hit:
                    break
            else:
                break  # no needle of this set: the rule cannot match
        else:
            out.append(r)
    return out


def rule_spans(text: str, *, strict: bool = False, pii: bool = True, longest: int | None = None) -> list[Span]:
    """The matches of the rules (only those text can match) as (kind, start, end)."""
    rules = active(ruleset(strict, pii), text, longest)
    return secret_rules.collect_spans(text, ((rule.kind, rule.rx) for rule in rules))


def spans(text: str, *, strict: bool = False, pii: bool = True) -> list[Span]:
    """Every secret of text: the rules through this module, with ``memd.core.secret_views``'s views
    and detectors (``secrets.spans`` is this)."""
    from memd.core import secret_views

    return secret_views.find(text, lambda t: rule_spans(t, strict=strict, pii=pii))


def scan(text: str, *, strict: bool = False, pii: bool = True) -> list[SecretHit]:
    """Exactly ``secrets.scan_all(text, strict=strict, pii=pii)``, faster (``secrets.scan`` is this)."""
    return secret_rules.hits_of(text, spans(text, strict=strict, pii=pii))


def scan_many(texts: list[str], *, strict: bool = False, pii: bool = True) -> list[list[SecretHit]]:
    """Exactly ``[scan(t) for t in texts]``, cheaper on ordinary text (``memd check`` over thousands of
    folders). The plain-ASCII texts are first looked at together, joined by newlines: a rule or a
    view that could find something in one of them could in the joined text (no needle, run or piece
    of one text is lost by joining), so when the joined text needs neither, no text does. Any other
    text is looked at alone, with the rules alone when the views cannot change it (``needs_views``).
    (A text with one non-ASCII character is stored wide: it is not joined to the others, whose every
    pass it would make slower.)"""
    out: list[list[SecretHit] | None] = [None] * len(texts)
    plain = [i for i, t in enumerate(texts) if t.isascii()]
    if len(plain) > 1:
        joined = "\n".join(texts[i] for i in plain)
        words = joined.split()
        longest = max(map(len, words), default=0)
        if not needs_views(joined, words, longest) and not active(ruleset(strict, pii), joined, longest):
            for i in plain:
                out[i] = []
    for i, t in enumerate(texts):
        if out[i] is None:
            words = t.split()
            longest = max(map(len, words), default=0)
            out[i] = _scan_one(t, needs_views(t, words, longest), longest, strict=strict, pii=pii)
    return [hits or [] for hits in out]


def _scan_one(text: str, views: bool, longest: int, *, strict: bool, pii: bool) -> list[SecretHit]:
    if views:
        return scan(text, strict=strict, pii=pii)
    found = rule_spans(text, strict=strict, pii=pii, longest=longest)
    # secret_views.find's answer when none of its detectors finds anything: the rules' spans, merged
    return secret_rules.hits_of(text, _merged(found)) if found else []


def _merged(found: list[Span]) -> list[Span]:
    from memd.core.secret_views import merge

    return merge([sorted(found, key=lambda s: (s[1], s[2]))])


# --------------------------------------------------------------------------- when the views can matter
# ``memd.core.secret_views.find`` runs, beside the rules over the text, detectors that each need
# something ordinary prose lacks. ``needs_views`` tells, cheaply and erring only towards yes, whether
# any of them could find anything; on "no" the rules alone give find's answer. The conditions, each
# read off the detector it stands for (tests/test_core_lint.py holds the two answers equal on the
# secret corpus and on generated text):
# - normalise: the text changes under NFKC or has format characters (never a plain-ASCII text);
# - the value next to its name (_context): one of its words (password, token, api key, ...);
# - base64 (_base64), a bare AWS key (_aws_secret), a key body (_key_bodies): a run of 16+ base64
#   characters holding an upper case letter or digit and a lower case letter, or any run of 40+;
# - a split token (_split_tokens): two token pieces one space or tab apart; a piece is a whole run of
#   token characters that holds a digit or a lower-upper step (4+ long) or is all upper case, digits
#   and symbols (6+), or the last 6+ characters of a run that are all of those.

_TOKEN = "A-Za-z0-9_+/=.\\-"  # secret_views' token characters
_TOKEN_SET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+/=.-")
_UPPER_CLASS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_+/=.-"  # what an all-upper piece is made of
# a run from its first upper case letter or digit, and the run after it when one space or tab follows
_SPECIAL_RUN = re.compile(f"[0-9A-Z][{_TOKEN}]*+(?:(?=[ \\t]([{_TOKEN}]++))|)")
_SYMBOL_BYTES = bytes.maketrans(b"_+/=.-", b"\x00" * 6)  # six symbols (a piece with no upper case letter
_SIX_SYMBOLS = b"\x00" * 6  # or digit) found as six NULs in a copy (no regex pass; NULs of the text err to yes)
_PIECE_SIGN = re.compile(r"\d|[a-z][A-Z]")
_DIGIT = re.compile(r"\d")
_B64ISH = re.compile(r"[A-Za-z0-9+/_\-]{16,}")
_UPPER_OR_DIGIT = re.compile(r"[A-Z0-9]")
_LOWER = re.compile(r"[a-z]")
# a prefix of secret_views._PREFIX_SPLIT then a blank (a wider look than that pattern: it errs to yes)
_PREFIX_SPLIT = re.compile(r"\b(?:gh[pousr]_|github_pat_|glpat-|xox[abposr]-|sk-|sk_live_|rk_live_|npm_|hf_|AIza|"
                           r"AKIA|ASIA|pypi-|SG\.|dop_v1_|shpat_|whsec_|gsk_|GOCSPX-|ya29\.|lin_api_|glsa_|r8_|xapp-)"
                           r"[ \t\r\n]")
_CONTEXT_HINTS = ("pass", "pwd", "secret", "token", "credential", "auth")


def _whole_piece(run: str) -> bool:
    if len(run) >= 4 and _PIECE_SIGN.search(run) is not None:
        return True
    return len(run) >= 6 and not run.strip(_UPPER_CLASS)


def _ends_in_piece(run: str) -> bool:
    return _whole_piece(run) or len(run) - len(run.rstrip(_UPPER_CLASS)) >= 6


def _split_pair(text: str) -> bool:
    """Whether two token pieces may stand one space or tab apart (see above)."""
    # the first of two pieces may be six symbols: no faster look for that one. (In UTF-8 the bytes of a
    # non-ASCII character are all >= 0x80, so six symbol bytes are six symbol characters.)
    if _SIX_SYMBOLS in text.encode("utf-8", "surrogatepass").translate(_SYMBOL_BYTES):
        return True
    # every other piece holds an upper case letter or digit. First the runs after them alone (findall
    # makes no match objects): in most texts none is a whole piece, and nothing more is looked at
    if not any(len(a) >= 4 and _whole_piece(a) for a in _SPECIAL_RUN.findall(text)):
        return False
    for m in _SPECIAL_RUN.finditer(text):
        after = m.group(1)
        # most runs after a blank are short or lower case words: a piece only with a digit
        if not after or len(after) < 4 or (after.islower() and _DIGIT.search(after) is None) \
                or not _whole_piece(after):
            continue
        e = s = m.end()
        while s and text[s - 1] in _TOKEN_SET:
            s -= 1
        if _ends_in_piece(text[s:e]):
            return True
    return False


_STABLE: dict[str, bool] = {}  # non-ASCII character -> NFKC leaves it as it is and it is no format character


def _stable(text: str) -> bool:
    """True when normalising leaves every character of text as it is (em dashes, curly quotes,
    accented letters: ``secret_views.normalise`` would answer None), told per distinct character."""
    for ch in set(text):
        if ch < "\x80":
            continue
        ok = _STABLE.get(ch)
        if ok is None:
            import unicodedata

            ok = _STABLE[ch] = unicodedata.category(ch) != "Cf" and unicodedata.normalize("NFKC", ch) == ch
        if not ok:
            return False
    return True


def needs_views(text: str, words: list[str] | None = None, longest: int | None = None) -> bool:
    """False only when no detector of ``secret_views.find`` can find anything in text, so its answer
    is the rules' alone (``words``/``longest``: ``text.split()`` and its longest, when at hand)."""
    if not text.isascii() and not _stable(text):
        from memd.core.secret_views import normalise

        if normalise(text) is not None:
            return True
    if "\\" in text:
        from memd.core.secret_views import has_escapes

        if has_escapes(text):  # JSON's escapes: secret_views.unescape
            return True
    low = text.lower()
    if any(w in low for w in _CONTEXT_HINTS) or ("key" in low and ("api" in low or "access" in low
                                                                      or "private" in low)):
        return True
    if words is None:
        words = text.split()
    if longest is None:
        longest = max(map(len, words), default=0)
    if longest >= 16:
        for w in words:
            if len(w) < 16:
                continue
            for m in _B64ISH.finditer(w):
                run = m.group()
                if len(run) >= 40 or (_UPPER_OR_DIGIT.search(run) is not None and _LOWER.search(run) is not None):
                    return True
    if _PREFIX_SPLIT.search(text) is not None:  # a provider's prefix, blanks, then the key (secret_views._prefix_split)
        return True
    from memd.core.secret_views import may_be_disguised

    if may_be_disguised(text):  # a key spaced a character at a time, or split over two lines
        return True
    return _split_pair(text)
