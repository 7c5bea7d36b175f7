"""What moved in a new Claude Code release, for memory: the checklist a maintainer runs the day it ships.

    .venv/bin/python -m tests.realcc.diff_versions 2.1.333            # against the tier's pinned version
    .venv/bin/python -m tests.realcc.diff_versions 2.1.333 --base 2.1.328

Installs both versions (``tests/realcc/cli.py``: npm into ~/.cache/memd-tests) and compares:

1. **Loading**: every case of the tier's battery (``tests/realcc/battery.py``) run through both CLIs;
   a case whose loaded MEMORY.md block differs is printed with both blocks, and with what memd says
   for each version (``memd.core.index.loaded_view`` with the version's ``keeps_refdefs``).
2. **Hook events** and **settings and environment names** the binaries hold: identifiers of the shapes
   Claude Code uses for them, found in the binary's bytes near the known ones, as sets; what one version
   has and the other does not is printed.
3. **Transcript records**: one session through each CLI; the keys of each record type (``user``,
   ``assistant``, ``system``, ``attachment``, ...) as sets, and record types only one version writes.

Exit status 0 when nothing moved, 1 when something did (read it, then update the tier, facts.md and
docs/conformance.md), 2 when a version cannot be had.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from memd.core.budget import version_tuple
from memd.core.index import keeps_refdefs, loaded_view
from tests.realcc.battery import CASES
from tests.realcc.cli import VERSION, Sandbox, ensure_cli, memory_block
from tests.realcc.stub import CliStub

# Known names, to find the tables they sit in (a new event or key is listed beside the old ones).
KNOWN_EVENTS = ("PreToolUse", "PostToolUse", "SessionStart", "SessionEnd", "UserPromptSubmit", "PreCompact",
                "SubagentStop", "Notification", "Stop")
# a string literal of the shape of an event name (errors and prose words aside)
EVENT_SHAPE = re.compile(rb"[\"'`]((?:Pre|Post|Session|User|Subagent|Stop|Notification|Permission"
                         rb"|Config|Instructions|Worktree|Task|Teammate|Elicitation)(?:[A-Z][a-z]+){0,6})[\"'`]")
SETTING_SHAPE = re.compile(rb"(?<![A-Za-z0-9_])(autoMemory[A-Za-z]{0,40}|cleanupPeriodDays"
                           rb"|CLAUDE_[A-Z_]{0,60}MEMORY[A-Z_]{0,40}|CLAUDE_CODE_PROJECT_DIR_NAME"
                           rb"|CLAUDE_CONFIG_DIR)(?![A-Za-z0-9_])")
WINDOW = 4096


def names_near(data: bytes, known: tuple[str, ...], shape: re.Pattern[bytes]) -> set[str]:
    """Identifiers of ``shape`` within WINDOW bytes of three or more ``known`` names (a table of them)."""
    hits = sorted(m.start() for k in known for m in re.finditer(re.escape(k.encode()), data))
    out: set[str] = set()
    for i, at in enumerate(hits):
        cluster = [h for h in hits[max(0, i - 8):i + 8] if abs(h - at) <= WINDOW]
        if len(cluster) < 3:
            continue
        for m in shape.finditer(data, max(0, at - WINDOW), at + WINDOW):
            out.add(m.group(1).decode())
    return out


def binary_names(binary: Path) -> tuple[set[str], set[str]]:
    data = binary.read_bytes()
    events = {e for e in names_near(data, KNOWN_EVENTS, EVENT_SHAPE) if not e.endswith(("Error", "Type"))}
    settings = {m.group(1).decode() for m in SETTING_SHAPE.finditer(data)}
    return events, settings


def _block(binary: Path, stub: CliStub, cid: str) -> str | None:
    base = Path(tempfile.mkdtemp(prefix="rcc"))
    try:
        sb = Sandbox(binary, stub, base)
        (sb.memory / "MEMORY.md").write_bytes(CASES[cid].text.encode("utf-8"))
        prompt = f"diff case {cid}"
        if sb.run(prompt).rc != 0:
            return "<the CLI failed>"
        reqs = sb.main_requests(prompt)
        return memory_block(reqs[0].body, sb.memory) if reqs else "<no request>"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def blocks(binary: Path) -> dict[str, str | None]:
    with CliStub() as stub, ThreadPoolExecutor(3) as pool:
        futures = {cid: pool.submit(_block, binary, stub, cid) for cid in CASES}
        return {cid: f.result() for cid, f in futures.items()}


def record_keys(binary: Path) -> dict[str, set[str]]:
    """Record type -> the keys its records carry, from one session's transcript."""
    base = Path(tempfile.mkdtemp(prefix="rcc"))
    try:
        with CliStub() as stub:
            sb = Sandbox(binary, stub, base)
            (sb.memory / "MEMORY.md").write_text("- [A](a.md) — a\n", encoding="utf-8")
            sb.run("diff transcript keys")
            out: dict[str, set[str]] = {}
            for path in sb.projects.rglob("*.jsonl"):
                for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(rec, dict):
                        out.setdefault(str(rec.get("type")), set()).update(rec)
            return out
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _sets(title: str, old: set[str], new: set[str], base: str, version: str) -> bool:
    gone, added = sorted(old - new), sorted(new - old)
    if not gone and not added:
        print(f"{title}: unchanged ({len(new)})")
        return False
    print(f"{title}: MOVED")
    for name in added:
        print(f"  + {name}   (in {version}, not in {base})")
    for name in gone:
        print(f"  - {name}   (in {base}, not in {version})")
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("version")
    ap.add_argument("--base", default=VERSION, help=f"the version to compare with (default: the pin, {VERSION})")
    args = ap.parse_args(argv)
    bins = {}
    for v in (args.base, args.version):
        b, why = ensure_cli(v)
        if b is None:
            print(f"Claude Code {v} cannot be had: {why}", file=sys.stderr)
            return 2
        bins[v] = b
    base, new = args.base, args.version
    moved = False
    print(f"# Claude Code {base} -> {new}: memory-related behaviour\n")
    old_b, new_b = blocks(bins[base]), blocks(bins[new])
    keep = {v: keeps_refdefs(version_tuple(v)) for v in (base, new)}
    differ = [cid for cid in CASES if old_b[cid] != new_b[cid]]
    print(f"loading: {len(CASES) - len(differ)} of {len(CASES)} battery cases load the same")
    for cid in differ:
        moved = True
        print(f"  case {cid}: MOVED")
        for v, got in ((base, old_b[cid]), (new, new_b[cid])):
            mine = loaded_view(CASES[cid].text, refdefs=keep[v]).text
            agree = "memd agrees" if (got or "") == mine.split("\n\n> WARNING:")[0] or got == mine else "MEMD DIFFERS"
            shown = (got or "<no block>")[:300].replace("\n", "\\n")
            print(f"    {v}: {shown}   [{agree}]")
    (old_ev, old_set), (new_ev, new_set) = binary_names(bins[base]), binary_names(bins[new])
    moved |= _sets("hook events", old_ev, new_ev, base, new)
    moved |= _sets("settings and environment names", old_set, new_set, base, new)
    old_rec, new_rec = record_keys(bins[base]), record_keys(bins[new])
    moved |= _sets("record types", set(old_rec), set(new_rec), base, new)
    for t in sorted(set(old_rec) & set(new_rec)):
        moved |= _sets(f"keys of {t!r} records", old_rec[t], new_rec[t], base, new)
    print("\n" + ("something moved: read it, then update the tier, facts.md and docs/conformance.md" if moved
                  else "nothing moved"))
    return 1 if moved else 0


if __name__ == "__main__":
    raise SystemExit(main())
