"""How sessions use their memory, read from transcript records (issue 31; facts.md section 9).

Claude Code 2.1.332 records, in a session's transcript:

- the index load: an ``attachment`` record whose ``attachment.type`` is ``instructions`` and whose
  ``files[]`` holds one of ``type: "AutoMem"`` (the visible lines of MEMORY.md);
- a read: an assistant ``Read`` tool_use on a memory file answered by a tool_result that is not an error
  (the answering user line's ``toolUseResult.file`` names the file);
- a recall: an ``attachment`` of type ``relevant_memories`` listing ``memories[].path``;
- a write: a ``Write``/``Edit``/``MultiEdit`` tool_use into the folder not answered by an error (its
  answer carries ``toolUseResult.filePath``, with ``memdirStamped`` for a Write and a ``structuredPatch``
  for an Edit);
- a Bash ``cat``/``grep``/``head``/... whose command names a memory file: a weak signal, counted apart.

Only these record shapes count: a path inside any other record type (``api-request-blob`` copies whole
requests, ``file-history-snapshot``, a tool result's text) is never a use. Each event has a key that is
the same however often the transcript is read (the tool_use id, the record's uuid, the session), so the
state counts it once (``memd.state.StateStore.record_uses``).
"""

from __future__ import annotations

import re
from typing import Any

from memd.record import Record

READ_TOOLS = frozenset({"Read"})
WRITE_TOOLS = frozenset({"Write", "Edit", "MultiEdit"})
_SHELL_READ = re.compile(r"(?:^|[\s;&|(])(?:cat|grep|rg|head|tail|less|more|sed|awk)\s")


class UseEvent(Record):
    """One use of memory: ``kind`` is load, read, recall, write or weak; ``path`` the absolute path of
    the file ('' for a load); ``key`` identifies the event across rescans."""

    kind: str
    key: str
    path: str
    at: float | None


class Uses:
    """The memory uses in one pass over one transcript, fed line by line (``feed``). A use is counted on
    its answer (a tool_result that is not an error), which names the file itself for a Read and a memory
    write, so a pass that ends between a tool_use and its answer loses nothing; a Bash command is known
    only from its tool_use, so one whose answer lands in the next pass is not counted (a weak signal)."""

    __slots__ = ("_pending", "events", "session")

    def __init__(self) -> None:
        self.events: list[UseEvent] = []
        self._pending: dict[str, tuple[str, str, float | None]] = {}  # tool_use id -> (kind, path, time)
        self.session = ""

    def feed(self, obj: dict[str, Any], ts: float | None) -> None:
        kind = obj.get("type")
        if not self.session:
            sid = obj.get("sessionId")
            if isinstance(sid, str):
                self.session = sid
        if kind == "attachment":
            self._attachment(obj, ts)
        elif kind == "assistant" and obj.get("isSidechain") is not True:
            for b in _blocks(obj):
                if not isinstance(b, dict) or b.get("type") != "tool_use" or not isinstance(b.get("id"), str):
                    continue
                name, inp = b.get("name"), b.get("input")
                if not isinstance(inp, dict):
                    continue
                fp = inp.get("file_path")
                if name in READ_TOOLS and isinstance(fp, str) and fp:
                    self._pending[b["id"]] = ("read", fp, ts)
                elif name in WRITE_TOOLS and isinstance(fp, str) and fp:
                    self._pending[b["id"]] = ("write", fp, ts)
                elif name == "Bash" and isinstance(inp.get("command"), str) and _SHELL_READ.search(inp["command"]):
                    self._pending[b["id"]] = ("weak", inp["command"][:4000], ts)
        elif kind == "user" and obj.get("isSidechain") is not True:
            for b in _blocks(obj):
                if not isinstance(b, dict) or b.get("type") != "tool_result":
                    continue
                tid = b.get("tool_use_id")
                if not isinstance(tid, str):
                    continue
                got = self._pending.pop(tid, None)
                if b.get("is_error") is True:
                    continue
                # the answer names its file itself (so a use is counted even when its tool_use line was
                # read by an earlier pass): a Read's ``file.filePath``; a write's ``filePath`` with
                # ``memdirStamped`` (Write) or a ``structuredPatch`` (Edit, MultiEdit: 2.1.332 stamps no Edit)
                res = obj.get("toolUseResult")
                f = res.get("file") if isinstance(res, dict) else None
                if isinstance(f, dict) and isinstance(f.get("filePath"), str) and f["filePath"]:
                    self.events.append(UseEvent("read", tid, f["filePath"], ts))
                elif (isinstance(res, dict) and isinstance(res.get("filePath"), str)
                      and (res.get("memdirStamped") is True or "structuredPatch" in res)):
                    self.events.append(UseEvent("write", tid, res["filePath"], ts))
                elif got is not None:
                    self.events.append(UseEvent(got[0], tid, got[1], got[2]))

    def _attachment(self, obj: dict[str, Any], ts: float | None) -> None:
        att = obj.get("attachment")
        if not isinstance(att, dict):
            return
        akind = att.get("type")
        if akind == "instructions":
            files = att.get("files")
            if isinstance(files, list) and any(isinstance(f, dict) and f.get("type") == "AutoMem" for f in files):
                # one load per session: a compaction or a resume loads the index again, the same session
                self.events.append(UseEvent("load", "", "", ts))
        elif akind == "relevant_memories":
            mems = att.get("memories")
            uuid = obj.get("uuid")
            if not isinstance(mems, list) or not isinstance(uuid, str):
                return
            for m in mems:
                p = m.get("path") if isinstance(m, dict) else None
                if isinstance(p, str) and p:
                    self.events.append(UseEvent("recall", uuid, p, ts))


def _blocks(obj: dict[str, Any]) -> list[Any]:
    msg = obj.get("message")
    content = msg.get("content") if isinstance(msg, dict) else None
    return content if isinstance(content, list) else []


def weak_names(command: str, names: set[str]) -> list[str]:
    """The memory files (relative names) a shell command names by their file name."""
    return sorted(n for n in names if n.rsplit("/", 1)[-1] in command)
