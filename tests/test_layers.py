"""The package's layers, read from the source with ast: no module imports a layer above its own.

The table below is the one statement of the layers; each package's ``__init__`` docstring and
README's "How it is built" say the same in words. Every import counts: at module level, inside
functions (the lazy ones) and under ``TYPE_CHECKING`` (a type is a dependency too).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

import memd

PACKAGE = Path(memd.__file__).parent

# (layer, modules): a module belongs to the first entry naming it or a package above it. A module
# may import its own layer and the layers before it, never one after it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # pure: text and values in, values out; no file, no config, no clock
    ("core", ("memd", "memd.record", "memd.core")),
    # the I/O edge: files, the state database, transcripts, the history, the config, the log
    ("edge", ("memd.errors", "memd.clock", "memd.config", "memd.store", "memd.projlock", "memd.memfolder",
              "memd.history", "memd.state", "memd.transcripts", "memd.layout", "memd.logs",
              "memd.schedule_windows", "memd.settings_merge", "memd.ccsettings", "memd.checkcache",
              "memd.sync.gitremote", "memd.sync.identity", "memd.sync.evidence")),
    # the work: jobs, the model, the guarded apply, rebuilds, recall
    ("work", ("memd.jobs", "memd.llm", "memd.apply", "memd.maintenance", "memd.inspect", "memd.recall", "memd.forget",
              "memd.sync")),
    # only wiring: watch, debounce, schedule, signals, the worker
    ("daemon", ("memd.daemon",)),
    # the door: the CLI and its commands, the Claude Code hooks, the viewer (`memd ui`)
    ("door", ("memd.cli", "memd.__main__", "memd.commands", "memd.hooks", "memd.ui")),
]
CORE_MAY_IMPORT = ("memd.core", "memd.record")  # the core's only memd imports (not even memd.errors)
# standard-library modules that read or write files, run processes or reach the network
CORE_NEVER_IMPORTS = ("os", "io", "shutil", "subprocess", "tempfile", "glob", "socket",
                      "sqlite3", "fcntl", "mmap", "http", "urllib.request", "tomllib")
IO_CALLS = frozenset({"open", "read_text", "read_bytes", "write_text", "write_bytes", "iterdir", "glob", "rglob",
                      "stat", "lstat", "exists", "is_file", "is_dir", "unlink", "mkdir", "resolve"})


def _name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


@functools.cache
def _tree(name: str) -> ast.Module:
    return ast.parse(MODULES[name].read_text(encoding="utf-8"), str(MODULES[name]))


def _imports(name: str) -> set[str]:
    """Every module name the source of ``name`` imports (``from a import b`` gives a, and a.b when b
    is a module), relative imports resolved."""
    package = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(_tree(name)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in MODULES)
    return out


def _memd_imports(name: str) -> set[str]:
    return {m for m in _imports(name) if m == "memd" or m.startswith("memd.")}


def _within(name: str, prefix: str) -> bool:
    """name is prefix or lies in it (the root ``memd`` names only the package's own __init__)."""
    return name == prefix or (prefix != "memd" and name.startswith(prefix + "."))


def _layer(name: str) -> int | None:
    """The index in LAYERS of the most specific entry naming name or a package above it."""
    best: tuple[int, int] | None = None  # (length of the prefix, layer)
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if _within(name, p) and (best is None or len(p) > best[0]):
                best = (len(p), i)
    return best[1] if best else None


CORE = sorted(m for m in MODULES if _within(m, "memd.core"))


def test_every_module_has_a_layer() -> None:
    missing = sorted(m for m in MODULES if _layer(m) is None)
    assert not missing, f"add these modules to LAYERS in tests/test_layers.py: {missing}"


def test_every_entry_of_the_table_exists() -> None:
    stale = [p for _, prefixes in LAYERS for p in prefixes if not any(_within(m, p) for m in MODULES)]
    assert not stale, stale


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_imports_a_layer_above_its_own(name: str) -> None:
    own = _layer(name)
    assert own is not None
    above = {m: LAYERS[layer][0] for m in _memd_imports(name) if (layer := _layer(m)) is not None and layer > own}
    assert not above, f"{name} ({LAYERS[own][0]}) imports from a higher layer: {above}"


@pytest.mark.parametrize("name", CORE)
def test_the_core_imports_only_the_core(name: str) -> None:
    outside = sorted(m for m in _memd_imports(name) if not any(_within(m, p) for p in CORE_MAY_IMPORT))
    assert not outside, f"{name} imports {outside}: pass the value in instead (see memd.core.budget)"


@pytest.mark.parametrize("name", CORE)
def test_the_core_reads_no_file(name: str) -> None:
    io = sorted(m for m in _imports(name) if any(_within(m, p) for p in CORE_NEVER_IMPORTS))
    called = {f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
              for n in ast.walk(_tree(name)) if isinstance(n, ast.Call) for f in [n.func]}
    calls = sorted(called & IO_CALLS)
    assert not io and not calls, (name, io, calls)


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of graph, as the path that closes it, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        path.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                return [*path[path.index(m):], m]
            if m not in state and (found := visit(m)):
                return found
        state[n] = 2
        path.pop()
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n)):
            return found
    return None


def test_no_import_cycle_inside_the_core() -> None:
    # the package __init__ is left out: importing memd.core.x always runs it first, never the reverse
    graph = {m: {d for d in _memd_imports(m) if d in CORE and d != "memd.core"} for m in CORE if m != "memd.core"}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle of graph: its strongly connected components of more than one module (or a module
    importing itself), each sorted, in order (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(n: str) -> None:
        index[n] = low[n] = len(index)
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if m not in index:
                visit(m)
                low[n] = min(low[n], low[m])
            elif m in stack:
                low[n] = min(low[n], index[m])
        if low[n] == index[n]:
            part = [stack.pop()]
            while part[-1] != n:
                part.append(stack.pop())
            if len(part) > 1 or n in graph.get(n, ()):
                out.append(sorted(part))

    for n in sorted(graph):
        if n not in index:
            visit(n)
    return sorted(out)


def test_no_import_circle_between_memd_modules() -> None:
    """No import circle anywhere in memd (issue 35): every import counts, the lazy ones and those under
    TYPE_CHECKING too, as in the layer checks above. No exception list: a circle is fixed by giving what
    both sides need one owner below them (the quick check path, ``memd.ui.diffs``)."""
    graph = {m: {d for d in _memd_imports(m) if d in MODULES and d != m} for m in MODULES}
    circles = _circles(graph)
    assert not circles, "import circles: " + "; ".join(
        " <-> ".join(c) + " (" + ", ".join(f"{a} imports {b}" for a in c for b in sorted(graph[a] & set(c))) + ")"
        for c in circles)


def test_the_circle_finder_lists_every_circle() -> None:
    graph = {"a": {"b"}, "b": {"a", "c"}, "c": {"d"}, "d": {"c"}, "e": {"a"}, "f": {"f"}}
    assert _circles(graph) == [["a", "b"], ["c", "d"], ["f"]]
    assert _circles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_the_cycle_finder_finds_one() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_relative_and_from_imports_are_resolved() -> None:
    assert {"memd.core", "memd.core.secret_rules", "memd.record"} <= _memd_imports("memd.core.fastscan") \
        | _memd_imports("memd.core.secret_rules")
    assert "memd.core.secrets" not in _memd_imports("memd.core.fastscan")


@pytest.mark.parametrize("package", sorted(m for m in MODULES if MODULES[m].name == "__init__.py"
                                           and m != "memd"))
def test_each_package_says_what_it_may_import(package: str) -> None:
    """Each package's docstring names what lives there and what it may import (the table's words)."""
    doc = ast.get_docstring(_tree(package)) or ""
    assert "may import" in doc.lower(), f"{package}: its __init__ docstring should say what it may import"


def test_the_cli_offers_every_command_module() -> None:
    from memd.cli import COMMANDS

    modules = {m.rpartition(".")[2] for m in MODULES if m.startswith("memd.commands.")}
    assert set(COMMANDS) == {m for m in modules if not m.startswith("_")}
