"""PreToolUse and PostToolUse on Write|Edit|MultiEdit: guard and measure memory writes.

Claude Code has no memory-write event (facts.md section 5), so memd watches the file tools and
filters on the path. A path outside every memory folder costs one cheap test
(:meth:`HookContext.may_be_memory`) and nothing else is imported for it.
"""

from __future__ import annotations

from memd.core import jsonfast
from memd.hooks.context import HookContext, MemoryTarget, absolute

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from memd.config import Config
    from memd.core.index import Budget

TOOLS = ("Write", "Edit", "MultiEdit")
_MAX_LISTED = 40  # hidden entries named in one message (the rest are counted)


class Unchecked(ValueError):
    """A file tool's call the guard cannot read (a field of the wrong type): the entry denies it when it
    may write into memory (``guard_failed``)."""


def type_name(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def target_of(event: dict[str, Any], hc: HookContext) -> MemoryTarget | None:
    """The memory file a Write/Edit/MultiEdit event aims at, or None. Unchecked when the call's input or
    its path is not what the tool takes (no object, a path that is no string): whether it aims at memory
    is then read off the raw event (``guard_failed``)."""
    if event.get("tool_name") not in TOOLS:
        return None
    tool_input = event.get("tool_input")
    if not isinstance(tool_input, dict):
        raise Unchecked(f"its tool_input is {type_name(tool_input)}, not an object")
    file_path = tool_input.get("file_path")
    if not isinstance(file_path, str):
        raise Unchecked(f"its file_path is {type_name(file_path)}, not a string")
    if not file_path or "\x00" in file_path:
        return None
    cwd = event.get("cwd")
    path = absolute(file_path, cwd if isinstance(cwd, str) and cwd else None)
    here = cwd if isinstance(cwd, str) and cwd else None
    if not hc.may_be_memory(path, here):
        return None
    return hc.memory_folder(path, here)


def new_texts(tool_name: str, tool_input: dict[str, Any]) -> list[str]:
    """The text a tool call would put into the file: Write's content, Edit's and MultiEdit's new strings.
    Unchecked when one is missing or not a string (the guard reads only text: a list or an object there
    would be written unread)."""
    if tool_name == "Write":
        return [_text(tool_input, "content")]
    if tool_name == "Edit":
        return [_text(tool_input, "new_string")]
    edits = tool_input.get("edits")
    if not isinstance(edits, list):
        raise Unchecked(f"its edits are {type_name(edits)}, not a list")
    out = []
    for n, e in enumerate(edits, 1):
        if not isinstance(e, dict):
            raise Unchecked(f"its edit {n} is {type_name(e)}, not an object")
        out.append(_text(e, "new_string", f"edit {n}'s "))
    return out


def _text(fields: dict[str, Any], key: str, of: str = "its ") -> str:
    value = fields.get(key)
    if not isinstance(value, str):
        raise Unchecked(f"{of}{key} is {'missing' if value is None else type_name(value)}, not a string")
    return value


# --------------------------------------------------------------------------- PreToolUse


def deny_reason(findings: list[tuple[str, str]], *, team: bool, pii: bool) -> str:
    """The reason shown to the model: kinds and places of what was found, never the text itself."""
    shown = "; ".join(f"{kind} ({where})" for kind, where in findings[:12])
    if len(findings) > 12:
        shown += f"; and {len(findings) - 12} more"
    what = "a secret or personal data" if team and pii else "a secret"
    scope = ("Team memory is synced to other people" if team
             else "Memory is loaded into every future session and kept on disk")
    return (f"memd blocked this memory write: it would put {what} into memory: {shown}. {scope}. "
            "Do not store credentials" + (" or personal contact data" if team and pii else "")
            + " in memory; write where the secret lives instead (the name of an environment variable, "
            "a vault path, a password-manager entry), then retry the write without it.")


def pre_tool_use(event: dict[str, Any], hc: HookContext) -> dict[str, Any] | None:
    target = target_of(event, hc)
    if target is None:
        return None
    tool_input = event["tool_input"]
    texts = new_texts(str(event.get("tool_name")), tool_input)
    if not any(texts) and event.get("tool_name") == "Write":
        return None  # (an edit that deletes can still join the pieces of a key: checked below)
    from memd.core import secrets

    cfg = hc.valid_config()
    if cfg is None:
        # a broken config silences memd's notes, never its guard: the secret scan runs on defaults
        hc.log("warning", "hook.config_invalid", hook_event="PreToolUse")
    pii = cfg.hooks.team_pii if cfg is not None else True
    limit = cfg.hooks.guard_max_chars if cfg is not None else GUARD_MAX_CHARS
    size = sum(map(len, texts))
    if size > limit:
        return too_large(hc, event, target.path, f"{size:,} characters of new text", limit)
    findings: list[tuple[str, str]] = []
    for n, text in enumerate(texts, 1):
        for hit in secrets.scan(text, strict=target.is_team, pii=pii):
            where = f"line {hit.line}" + (f" of edit {n}" if len(texts) > 1 else "")
            findings.append((hit.kind, where))
    if not findings and event.get("tool_name") in ("Edit", "MultiEdit"):
        completed = _completed_by_edit(target.memory_dir, target.posix_rel, tool_input, str(event.get("tool_name")),
                                       strict=target.is_team, pii=pii, limit=limit)
        if completed is None:
            return too_large(hc, event, target.path, "the edited file", limit)
        findings = completed
    if not findings:
        return None  # no "allow": Claude Code's own permission flow decides
    kinds = sorted({k for k, _ in findings})
    hc.log("warning", "hook.denied", tool=event.get("tool_name"), file=target.path, kinds=kinds,
           team=target.is_team)
    return {"hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": deny_reason(findings, team=target.is_team, pii=pii),
    }}


GUARD_MAX_CHARS = 1_000_000  # hooks.guard_max_chars's default (a broken config does not lift the bound)


def too_large(hc: HookContext, event: dict[str, Any], path: str, what: str, limit: int) -> dict[str, Any]:
    """The denial of a memory write too large to check within the hook's time: never let through unchecked
    (Claude Code goes on with the write when a hook times out)."""
    hc.log("warning", "hook.denied_too_large", tool=event.get("tool_name"), file=path, what=what, limit=limit)
    return {"hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": (
            f"memd blocked this memory write: {what} is more than its secret guard checks in the hook's time "
            f"({limit:,} characters, hooks.guard_max_chars). Memory files are short notes: write a shorter "
            "file (move bulk data out of memory and note where it lives), then retry."),
    }}


def raw_fields(parts: tuple[bytes, ...]) -> dict[str, list[str]]:
    """The event's names read from its raw JSON (parts: its bytes, or the head and tail of an event too large
    to parse): a key with its quote unescaped after ``{`` or ``,`` is a key (inside a string every quote is
    escaped), and its value a short string. A value that is not UTF-8 is read with U+FFFD for its bad bytes."""
    import re

    found: dict[str, list[str]] = {}
    for part in parts:
        for m in re.finditer(_RAW_KEY, part):
            body = m.group(2)
            try:
                value = jsonfast.loads(b'"' + body + b'"')
            except ValueError:
                try:
                    value = jsonfast.loads('"' + body.decode("utf-8", "replace") + '"')
                except ValueError:
                    continue
            if isinstance(value, str):
                found.setdefault(m.group(1).decode(), []).append(value)
    return found


def oversized_event(head: bytes, tail: bytes, hc: HookContext) -> tuple[str | None, dict[str, Any] | None]:
    """(the event's name, the answer) for an event too large to parse (over ``entry.MAX_EVENT_BYTES``;
    head is its first bytes, tail its last): a PreToolUse write into a memory folder is denied
    (``too_large``); anything else gets no answer. The names are read from the raw JSON (``raw_fields``).
    A PreToolUse whose file path is in neither part raises: the entry reports that the guard could not
    check the write (never silence)."""
    found = raw_fields((head, tail))
    name = found.get("hook_event_name", [None])[0]
    if name != "PreToolUse":
        return name, None
    tool, cwd, paths = found.get("tool_name", [""])[0], found.get("cwd", [""])[0], found.get("file_path", [])
    if not paths and tool in TOOLS:
        raise ValueError(f"a {tool} event of more than {len(head):,} bytes whose file path memd could not read")
    for path in paths:
        event = {"tool_name": tool, "tool_input": {"file_path": path}, "cwd": cwd}
        target = target_of(event, hc)
        if target is not None:
            return name, too_large(hc, event, target.path, f"a tool call of more than {len(head):,} bytes",
                                   GUARD_MAX_CHARS)
    return name, None


def guard_failed(event: dict[str, Any] | None, raw: bytes, hc: HookContext, why: str) -> dict[str, Any] | None:
    """The answer to a PreToolUse the guard could not check (an event that is no JSON object memd can read:
    nested past the interpreter's limit, not UTF-8, a number past Python's digit limit; a field of the wrong
    type; any error of the check): a denial when the call may write into a memory folder, else None.

    What it aims at is read from the parsed event where there is one, else from the raw JSON
    (``raw_fields``); a file tool whose path cannot be read at all, and a path whose own test fails,
    count as memory (fail closed). Another tool, or a path outside every memory folder, is no business of
    the guard's: None (the entry reports the error, and the call goes on)."""
    found = raw_fields((raw,)) if raw else {}
    if event is None and found.get("hook_event_name", ["PreToolUse"])[0] != "PreToolUse":
        return None
    tool = event.get("tool_name") if event is not None else None
    if not isinstance(tool, str):
        tool = found.get("tool_name", [None])[0]
    cwd = event.get("cwd") if event is not None else None
    if not isinstance(cwd, str):
        cwd = found.get("cwd", [""])[0]
    paths = list(found.get("file_path", []))
    tool_input = event.get("tool_input") if event is not None else None
    if isinstance(tool_input, dict) and isinstance(tool_input.get("file_path"), str):
        paths.insert(0, tool_input["file_path"])
    if tool is not None and tool not in TOOLS:
        return None
    where = next(iter(paths), "")
    if tool is not None and not paths:
        return could_not_check(hc, tool, where, why)
    for path in paths:
        probe = {"tool_name": tool or "Write", "tool_input": {"file_path": path}, "cwd": cwd}
        try:
            target = target_of(probe, hc)
        except Exception:
            target = None
            try:
                memory = hc.may_be_memory(absolute(path, cwd or None), cwd or None)
            except Exception:
                memory = True
            if memory:
                return could_not_check(hc, tool, path, why)
        if target is not None:
            return could_not_check(hc, tool, target.path, why)
    return None


def could_not_check(hc: HookContext, tool: object, path: str, why: str) -> dict[str, Any]:
    """The denial of a memory write the guard could not check: the reason says what memd could not read
    and what to do (a plain call: a file path and text), never the text itself."""
    hc.log("warning", "hook.denied_unchecked", tool=str(tool), file=path[:1000], why=why[:300])
    return {"hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": (
            f"memd blocked this memory write: its secret guard could not check it ({why[:300]}), and a memory "
            "write it cannot check is never let through. Retry it as a plain call: a file_path string and the "
            "new text as a string (Write's content, Edit's new_string), with no other nested data. If the "
            "retry is blocked the same way, tell the user: memd's log says more (memd logs)."),
    }}


_RAW_KEY = rb'[{,][ \t\r\n]*"(hook_event_name|tool_name|file_path|cwd)"[ \t\r\n]*:[ \t\r\n]*"((?:[^"\\]|\\.){0,4096})"'


def edited(original: str, tool_name: str, tool_input: dict[str, Any]) -> str | None:
    """The file as an Edit/MultiEdit would leave it (None when an edit would not apply)."""
    edits: list[Any] = [tool_input] if tool_name == "Edit" else list(tool_input.get("edits") or [])
    text = original
    for e in edits:
        if not isinstance(e, dict):
            return None
        old, new = e.get("old_string"), e.get("new_string")
        if not isinstance(old, str) or not isinstance(new, str) or not old or old not in text:
            return None
        text = text.replace(old, new) if e.get("replace_all") else text.replace(old, new, 1)
    return text


def _completed_by_edit(memory_dir: str, rel: str, tool_input: dict[str, Any], tool_name: str, *, strict: bool,
                       pii: bool, limit: int = GUARD_MAX_CHARS) -> list[tuple[str, str]] | None:
    """Secrets an edit completes from pieces (the new string alone looks harmless: "AKIA..|" + "..."):
    what the resulting file holds that the file did not hold before. None when the file or the result
    is longer than limit characters (too large to check in the hook's time)."""
    from collections import Counter

    from memd.core import secrets

    original = read_text(memory_dir, rel, 4 * limit + 4)  # (UTF-8: up to 4 bytes a character)
    if original is None:
        return []
    if len(original) > limit:
        return None
    result = edited(original, tool_name, tool_input)
    if result is None or result == original:
        return []
    if len(result) > limit:
        return None
    before = Counter(h.kind for h in secrets.scan(original, strict=strict, pii=pii))
    after = secrets.scan(result, strict=strict, pii=pii)
    extra = Counter(h.kind for h in after) - before
    out: list[tuple[str, str]] = []
    for hit in reversed(after):  # an edit appends more often than it prepends: name the last ones
        if extra[hit.kind] > 0:
            extra[hit.kind] -= 1
            out.append((hit.kind, f"line {hit.line} of the edited file"))
    return list(reversed(out))


# --------------------------------------------------------------------------- PostToolUse


def read_text(memory_dir: str, rel: str, max_bytes: int) -> str | None:
    """The text of memory file memory_dir/rel (at most max_bytes of it: a longer file is cut), or None
    when it is no memory file memd reads (``memd.memfolder.walk.locate``: no symlink out of the folder)."""
    from memd.memfolder.read import read_bounded
    from memd.memfolder.walk import locate

    path = locate(memory_dir, rel, None)
    if path is None:
        return None
    r = read_bounded(path, max_bytes, hash=False, cut=True)
    return None if r.data is None else r.data.decode("utf-8", errors="replace")


def _figures(b: Budget) -> str:
    return (f"{b.lines} of {b.max_lines} lines and {b.chars:,} of {b.max_chars:,} characters "
            f"({max(b.line_ratio, b.char_ratio):.0%} of what Claude Code loads at session start)")


def condense_advice(cfg: Config) -> str:
    target = max(1, int(cfg.budget.max_lines * 0.7))
    return (f"keep one line per entry (`- [Title](file.md) — one-line hook`, at most "
            f"{cfg.budget.max_index_line} characters), move details into topic files, and merge or delete "
            f"stale or duplicate entries; aim for under {target} lines.")


def hidden_list(b: Budget, budget_chars: int = 8000) -> str:
    out: list[str] = []
    used = 0
    for i, e in enumerate(b.hidden):
        line = f"- {e.title or e.target} ({e.file}, line {e.line})"
        if i >= _MAX_LISTED or used + len(line) > budget_chars:
            out.append(f"- … and {len(b.hidden) - i} more")
            break
        out.append(line)
        used += len(line) + 1
    return "\n".join(out)


def budget_message(b: Budget, cfg: Config, where: str) -> str | None:
    if b.level == "over":
        hidden = (f" These {len(b.hidden)} index entries are past the cut and invisible to every new "
                  f"session:\n{hidden_list(b)}\n" if b.hidden else " The end of the index is cut off.\n")
        return (f"memd: {where} is OVER the budget Claude Code loads: {_figures(b)}.{hidden}"
                f"Rewrite {where} now so it fits again: {condense_advice(cfg)}")
    if b.level == "near":
        return (f"memd: {where} is near the budget Claude Code loads: {_figures(b)}. Entries past the "
                f"limit would become invisible to new sessions. Condense it soon: {condense_advice(cfg)}")
    return None


def hidden_only_message(b: Budget, where: str) -> str | None:
    """What memd adds when Claude Code gave its own near/over note: only which entries it will not
    load, by title. Claude Code's note already has the figures and asks for the rewrite, so this
    repeats neither (no counts of lines or characters, no advice)."""
    if not b.hidden:
        return None
    n = len(b.hidden)
    which = "This index entry is" if n == 1 else f"These {n} index entries are"
    return (f"memd: {which} past the cut of {where} and invisible to every new session, so keep what "
            f"matters of them when you rewrite it:\n{hidden_list(b)}")


# Claude Code's own budget note after a write of the memory index (facts.md section 2): since
# 2.1.210 an error when the write leaves MEMORY.md over the limit and a milder reminder near it;
# 2.1.328 (the real-client tier's pin) gives the reminder from 80% of the loaded view (160 lines).
# 2.1.145 (the version analysed in the seed notes) had neither. From this version on memd leaves the
# figures and the advice to Claude Code and adds only what Claude Code does not say.
CC_BUDGET_NOTES_SINCE = (2, 1, 210)
CC_NEAR_RATIO = 0.8  # where Claude Code's reminder starts (2.1.328)
def refdefs_for(text: str, event: dict[str, Any], cfg: Config) -> bool:
    """Whether the session's Claude Code keeps the index's link reference definitions
    (``memd.core.index.keeps_refdefs``): ``budget.claude_code_version`` when set, else the version of
    the session's transcript. Looked up only for an index that holds a comment and a definition."""
    if "<!--" not in text or "]:" not in text:
        return True
    from memd.core import index
    from memd.core.budget import refdefs_kept, version_tuple

    if version_tuple(cfg.budget.claude_code_version) is not None:
        return refdefs_kept(cfg.budget)
    from memd.ccsettings import transcript_version  # (memory_folder has loaded it)

    return index.keeps_refdefs(transcript_version(event.get("transcript_path")))


def cc_gives_budget_notes(event: dict[str, Any], cfg: Config) -> bool:
    """Whether the Claude Code of this session gives its own near/over note after an index write:
    ``hooks.cc_budget_notes`` "yes"/"no" forces it; "auto" reads the session's version (unknown:
    no, so memd's full note is never lost)."""
    mode = cfg.hooks.cc_budget_notes
    if mode != "auto":
        return mode == "yes"
    from memd.ccsettings import transcript_version  # (memory_folder has loaded it)

    version = transcript_version(event.get("transcript_path"))
    return version is not None and version >= CC_BUDGET_NOTES_SINCE


def cc_speaks(b: Budget) -> bool:
    """Whether Claude Code's own note follows an index write with this budget (near from 80%, over)."""
    return b.level == "over" or max(b.line_ratio, b.char_ratio) >= CC_NEAR_RATIO


def long_lines_note(text: str, cfg: Config) -> str | None:
    from memd.core import index

    limit = cfg.budget.max_index_line
    idx = index.parse(text)
    long = index.long_lines(idx, limit)
    if not long:
        return None
    shown = ", ".join(f"line {n} ({length} chars)" for n, length in long[:10])
    more = f" and {len(long) - 10} more" if len(long) > 10 else ""
    return (f"memd: MEMORY.md has {len(long)} line{'s' if len(long) != 1 else ''} over {limit} characters "
            f"({shown}{more}). It is an index: one short line per entry; put the detail in the topic file.")


def topic_note(target: MemoryTarget, cfg: Config) -> str | None:
    """A short note for a topic file whose frontmatter lacks what recall and the index rely on."""
    if not target.rel.endswith(".md"):
        return None
    head = read_text(target.memory_dir, target.posix_rel, 64_000)
    if head is None:
        return None
    from memd.core import frontmatter

    has, yaml_text, _, _ = frontmatter.split(head)
    name = target.rel
    if not has:
        return (f"memd: {name} has no frontmatter. Start topic files with `---` / `name:` / `description:` "
                f"(one line: what recall uses to find it) / `type:` ({', '.join(frontmatter.MEMORY_TYPES)}) "
                "/ `---`.")
    data = frontmatter.parse_lenient(yaml_text)
    meta = data.get("metadata")
    mtype = data.get("type") or (meta.get("type") if isinstance(meta, dict) else None)
    desc = data.get("description")
    missing = [k for k, v in (("description", desc), ("type", mtype)) if not (isinstance(v, str) and v.strip())]
    notes: list[str] = []
    if missing:
        notes.append(f"has no {' or '.join(missing)} in its frontmatter")
    if isinstance(mtype, str) and mtype.strip() and mtype.strip() not in frontmatter.MEMORY_TYPES:
        notes.append(f"has type {mtype.strip()!r}, not one of {', '.join(frontmatter.MEMORY_TYPES)}")
    if not notes:
        return None
    return (f"memd: {name} {' and '.join(notes)}. Recall picks memories by their one-line description; "
            "add it so this memory can be found.")


def post_tool_use(event: dict[str, Any], hc: HookContext) -> dict[str, Any] | None:
    target = target_of(event, hc)
    if target is None:
        return None
    cfg = hc.config
    notes: list[str] = []
    text = read_text(target.memory_dir, target.index_rel, cfg.budget.max_file_bytes)
    if text is not None:
        from memd.core import index

        b = index.measure(text, cfg.budget.max_lines, cfg.budget.max_chars, cfg.hooks.near_ratio,
                          refdefs=refdefs_for(text, event, cfg))
        # Claude Code's own note follows a write of the main index (not team/'s, not a topic file)
        if target.is_index and not target.is_team and cc_speaks(b) and cc_gives_budget_notes(event, cfg):
            msg = hidden_only_message(b, target.index_rel)
        else:
            msg = budget_message(b, cfg, target.index_rel)
        if msg:
            notes.append(msg)
        if target.is_index:
            note = long_lines_note(text, cfg)
            if note:
                notes.append(note)
    if not target.is_index:
        note = topic_note(target, cfg)
        if note:
            notes.append(note)
    if not notes:
        return None
    hc.log("info", "hook.post_tool_use.note", file=target.path, notes=len(notes))
    return {"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "\n\n".join(notes)}}
