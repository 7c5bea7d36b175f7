"""Every regular expression that runs on memory or transcript text, found in the source, and a
time check that feeds each one pathological input (shared by tests/test_regex_linear.py and
bench/fuzz.py).

``discover`` walks the modules' syntax trees for ``re.<function>(pattern, ...)`` calls; each is
keyed ``module:owner`` (the name it is assigned to, or the function it runs in). ``patterns`` gives
the pattern(s) behind a key: its source evaluated in the module (constants, names, f-strings of
module constants), or for a pattern built at run time, what ``DYNAMIC`` says it is built from.

``pathological`` builds inputs from a pattern's own text (each character it names repeated, each
literal fragment repeated, a fragment then a long run) plus the classic shapes (blank runs, runs of
backticks, brackets, backslashes). ``timed`` runs a pattern over an input against a deadline that
is a multiple of a plain regex scan of the same bytes, measured just before: a linear pattern
takes at most a few hundred times that scan (bounded quantifiers pay their bound at each start),
a quadratic one millions of times, so the deadline (an interval timer; the re module checks for
signals while it matches) stops it early.
"""

from __future__ import annotations

import ast
import functools
import re
import signal
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCOPE = ("memd/core/*.py", "memd/transcripts/*.py", "memd/memfolder/*.py", "memd/hooks/*.py", "memd/ccsettings.py",
         "memd/llm/memtool.py", "memd/recall.py", "memd/sync/merge.py")
_FUNCS = frozenset({"compile", "search", "match", "fullmatch", "sub", "subn", "split", "findall", "finditer"})
RATIO = 1500  # deadline: this many plain scans of the same bytes (linear patterns stay under ~300)
SIZE = 1 << 20  # characters of each pathological input

Pattern = str | bytes


class Site:
    """One ``re.<function>(...)`` call in the source."""

    def __init__(self, module: str, owner: str, source: str, flags: str | None, mode: str) -> None:
        self.module, self.owner, self.source, self.flags = module, owner, source, flags
        self.mode = mode  # how the code runs it: "finditer" (any search), "match" or "fullmatch"

    @property
    def key(self) -> str:
        return f"{self.module}:{self.owner}"


def _module_files() -> list[Path]:
    return sorted({p for g in SCOPE for p in ROOT.glob(g)})


def _flags_arg(call: ast.Call) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == "flags":
            return kw.value
    pos = {"compile": 1, "search": 2, "match": 2, "fullmatch": 2, "findall": 2, "finditer": 2, "split": 3,
           "sub": 4, "subn": 4}[call.func.attr]  # type: ignore[attr-defined]
    return call.args[pos] if len(call.args) > pos else None


def _uses() -> dict[str, set[str]]:
    """name -> the methods called on it anywhere in scope (``LINK.finditer``, ``_FENCE.match``)."""
    out: dict[str, set[str]] = {}
    for path in _module_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                v = node.func.value
                name = v.id if isinstance(v, ast.Name) else v.attr if isinstance(v, ast.Attribute) else None
                if name is not None:
                    out.setdefault(name, set()).add(node.func.attr)
    return out


def _mode(methods: set[str]) -> str:
    if methods and methods <= {"fullmatch"}:
        return "fullmatch"
    if methods and methods <= {"match", "fullmatch"}:
        return "match"
    return "finditer"  # searched, or used where the audit cannot follow it: the widest


@functools.cache
def discover() -> list[Site]:
    """Every ``re`` call in the modules of ``SCOPE``."""
    sites: list[Site] = []
    uses = _uses()
    for path in _module_files():
        module = path.relative_to(ROOT).with_suffix("").as_posix()
        _visit(ast.parse(path.read_text(encoding="utf-8")), "", module, uses, {}, sites)
    return sites


def _visit(node: ast.AST, owner: str, module: str, uses: dict[str, set[str]], seen: dict[str, int],
           sites: list[Site]) -> None:
    for child in ast.iter_child_nodes(node):
        name = owner
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = child.name if owner == "" else f"{owner}.{child.name}"
        elif isinstance(child, (ast.Assign, ast.AnnAssign)):
            targets = child.targets if isinstance(child, ast.Assign) else [child.target]
            ids = [t.id for t in targets if isinstance(t, ast.Name)]
            if ids:
                name = ids[0] if owner == "" else f"{owner}.{ids[0]}"
        if (isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute)
                and isinstance(child.func.value, ast.Name) and child.func.value.id == "re"
                and child.func.attr in _FUNCS and child.args):
            label = name or "<module>"
            seen[label] = seen.get(label, 0) + 1
            if seen[label] > 1:
                label = f"{label}#{seen[label]}"
            flags = _flags_arg(child)
            func = child.func.attr
            mode = _mode(uses.get(name.rsplit(".", 1)[-1], set())) if func == "compile" else (
                func if func in ("match", "fullmatch") else "finditer")
            sites.append(Site(module, label, ast.unparse(child.args[0]),
                              ast.unparse(flags) if flags is not None else None, mode))
        _visit(child, name, module, uses, seen, sites)


def _module(name: str) -> dict[str, object]:
    import importlib

    return vars(importlib.import_module(name.replace("/", ".")))


def _secret_rules() -> list[tuple[Pattern, int]]:
    from memd.core import secret_rules

    return [(p, 0) for _, p in secret_rules.SPECS + secret_rules.PII_SPECS]


def _guard_words() -> list[tuple[Pattern, int]]:
    # _words_in: a line of the user's index prose, escaped, between word-boundary lookarounds
    return [("(?<!\\w)" + re.escape(n) + "(?!\\w)", 0) for n in ("note 1", "a" * 200, "x x x", "1")]


# Patterns built at run time: key -> the patterns the code builds (flags included)
DYNAMIC: dict[str, Callable[[], list[tuple[Pattern, int]]]] = {
    "memd/core/secret_rules:compiled.rx": _secret_rules,
    "memd/core/guard:_words_in": _guard_words,
    "memd/core/guard:without_words": _guard_words,  # the same shape, matched once to take the words out
}


def patterns(site: Site) -> list[tuple[Pattern, int]]:
    """The pattern(s) and flags a call site runs."""
    if site.key in DYNAMIC:
        return DYNAMIC[site.key]()
    scope = _module(site.module)
    with warnings.catch_warnings():  # an unparsed f-string may spell "\\s" as "\s"
        warnings.simplefilter("ignore")
        pattern = eval(site.source, dict(scope))  # constants, module names, f-strings of module names
    flags = int(eval(site.flags, {"re": re, **scope})) if site.flags else 0
    assert isinstance(pattern, (str, bytes)), (site.key, pattern)
    return [(pattern, flags)]


_BASE_CHARS = " \t\n\r`-_.:=/+#*[]()<>\"'!\\@~{}|%&?$;,ab0AZ9\u3000\u200b\uff53"
_LITERAL = re.compile(r"(?:\\[^A-Za-z0-9]|[A-Za-z0-9_\-:@/.=,;!#%&<>~\"'`\u0080-\uffff])+")
_NOT_LITERAL = re.compile(r"\\[A-Za-z]|\[[^\]]*\]|\{\d*,?\d*\}|\(\?[a-zA-Z:=!<]*")


def _fragments(src: str) -> list[str]:
    """Literal pieces of a pattern's source ("sk-", "AKIA", "data:", "<!--"), unescaped."""
    out: list[str] = []
    for m in _LITERAL.finditer(_NOT_LITERAL.sub("\x00", src)):
        for frag in re.sub(r"\\(.)", r"\1", m.group(0)).split("\x00"):
            if len(frag) >= 2 and frag not in out:
                out.append(frag)
    return out[:16]


def pathological(pattern: Pattern, size: int = SIZE) -> Iterator[tuple[str, str]]:
    """(label, text) inputs of about ``size`` characters built to make ``pattern`` backtrack."""
    src = pattern.decode("latin-1") if isinstance(pattern, bytes) else pattern
    chars = [c for c in _BASE_CHARS if c in src or c in " \na0A`"]
    for c in dict.fromkeys(chars):
        yield f"{c!r}*n", c * size
    for a, b in (("a", " "), (" ", "\n"), ("`", "a"), ("\\", "]"), ("[", "]"), ("a", "-"), ("0", "."),
                 ("\\", "["), ("a", "="), ("0", "a")):
        yield f"{a + b!r}*n", (a + b) * (size // 2)
    yield "' a'+' '*n+'b'", " a" + " " * size + "b"
    for frag in _fragments(src):
        reps = size // len(frag)
        yield f"{frag!r}*n", frag * reps
        yield f"{frag + ' '!r}*n", (frag + " ") * (size // (len(frag) + 1))
        yield f"{frag!r}+'a'*n", frag + "a" * size
        yield f"{frag!r}+' '*n+'x'", frag + " " * size + "x"
        yield f"{frag!r}+' a'+' '*n+'b'", frag + " a" + " " * size + "b"
        yield f"({frag!r}+'a'*100)*n", (frag + "a" * 100) * (size // (len(frag) + 100))
        for sep in "-.:=":  # many starts inside one run, each scanning to its end
            yield f"({sep!r}+{frag!r})*n", (sep + frag) * (size // (len(frag) + 1))
    for c in dict.fromkeys(c for c in src if not c.isalnum() and c not in "\\()[]{}?*+|^$"):
        yield f"{c + ' a'!r}+' '*n+'b'", c + " a" + " " * size + "b"


def quick(pattern: Pattern, size: int = SIZE) -> list[tuple[str, str]]:
    """The CI tier's inputs for a pattern: a few of ``pathological``'s shapes, each ``size`` long
    (blank runs; runs of backticks, brackets, braces, comment openers or escaped brackets where the
    pattern names them; the pattern's first literal repeated after "-", else a long word)."""
    src = pattern.decode("latin-1") if isinstance(pattern, bytes) else pattern
    out = [("' \\n'*n", " \n" * (size // 2))]
    for ch, label in (("`", "'`'*n"), ("[", "'['*n"), ("{", "'{'*n"), ("<", "'<!--'*n"), ("\\\\", "'\\\\['*n")):
        if ch in src:
            unit = {"<": "<!--", "\\\\": "\\["}.get(ch, ch)
            out.append((label, unit * (size // len(unit))))
    for frag in _fragments(src)[:1]:
        out.append((f"('-'+{frag!r})*n", ("-" + frag) * (size // (len(frag) + 1))))
    if len(out) < 2:
        out.append(("'a'*n", "a" * size))
    return out


_PLAIN = re.compile("[\x00\x01]")
_PLAIN_B = re.compile(b"[\x00\x01]")


class Deadline(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise Deadline


def plain_scan(text: str | bytes) -> float:
    """CPU seconds of one plain regex pass over text (a character class that never matches), best of 3.

    CPU time, not wall time, here and in ``timed``: under load (a suite run beside another, a load
    average of 15 on two cores) a wall clock counts the time the process waited for a core, and a
    linear scan missed its deadline (issue 34: tests that fail only under load are fixed, not retried)."""
    rx: re.Pattern[str] | re.Pattern[bytes] = _PLAIN_B if isinstance(text, bytes) else _PLAIN
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        rx.search(text)  # type: ignore[arg-type]
        best = min(best, time.process_time() - t0)
    return max(best, 1e-4)


def timed(run: Callable[[], object], deadline: float) -> float | None:
    """CPU seconds run() took, or None when it was stopped at ``deadline`` CPU seconds (ITIMER_PROF
    counts this process's user and system time, so waiting for a core on a loaded machine is not
    counted; a quadratic path still burns its CPU and is stopped)."""
    old = signal.signal(signal.SIGPROF, _alarm)
    t0 = time.process_time()
    try:
        signal.setitimer(signal.ITIMER_PROF, deadline)
        try:
            run()
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
    except Deadline:
        return None
    finally:
        signal.signal(signal.SIGPROF, old)
    return time.process_time() - t0


def check(rx: re.Pattern[str] | re.Pattern[bytes], text: str, mode: str = "finditer",
          ratio: float = RATIO) -> tuple[float, float | None]:
    """(plain scan seconds, pattern seconds or None when past ``ratio`` plain scans): rx run over
    text the way the code runs it (``mode``: every match as ``finditer`` walks them, which is what
    search, sub, split and findall do; or one ``match`` / ``fullmatch``)."""
    data: str | bytes = text.encode("utf-8") if isinstance(rx.pattern, bytes) else text

    def run() -> object:
        if mode == "finditer":
            return sum(1 for _ in rx.finditer(data))  # type: ignore[arg-type]
        return getattr(rx, mode)(data)

    base = plain_scan(data)
    took = timed(run, base * ratio)
    if took is None:  # a loaded machine can stall one run: measure both again before failing
        base = plain_scan(data)
        took = timed(run, base * ratio)
    return base, took
