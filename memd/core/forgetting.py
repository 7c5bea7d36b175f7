"""A forget record: what ``memd forget`` took out, told to the other machines without the thing itself.

When ``memd forget --apply`` rewrites a project's sync branch it puts one commit on top whose message
carries a record (a ``memd-forget:`` trailer line), so the other machines forget the same thing at their
next sync. The record never holds what was forgotten:

- ``literal`` (``--string``): a random salt, the SHA-256 of salt + the text's UTF-8 bytes, and their
  length. Another machine finds the text by hashing every window of that length of its own files and
  history (``find_literal``); the salt makes every record's hash its own (no table built once serves).
  A short literal can still be guessed by whoever reads the remote and tries candidates against the
  hash: docs/reliability.md says so.
- ``pattern`` (``--pattern``): the regular expression itself (it describes a shape, it is not the secret).
- ``secrets`` (``--secrets``): nothing more; each machine runs its own secret rules.

Every record has an id (random hex) so a machine applies it once, and the machine that wrote it.
A forget commit also maps the commits it rewrote, old id to new (``memd-forget-map:`` lines): a
machine whose last shared commit was rewritten finds its new base there. Pure: the caller supplies
the salt and the id (``os.urandom``), and the bytes to search.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

KINDS = ("literal", "pattern", "secrets")
TRAILER = "memd-forget"
MAP_TRAILER = "memd-forget-map"
_LINE = re.compile(rf"^{TRAILER}:[ \t]*(.*)$", re.M)
_MAP = re.compile(rf"^{MAP_TRAILER}:[ \t]*([0-9a-f]{{40}})[ \t]+([0-9a-f]{{40}})[ \t]*$", re.M)
_HEX = re.compile(r"^[0-9a-f]+$")
MAX_LITERAL = 4096  # bytes: longer literals are refused by the reader (a window hash per byte offset)


class RecordError(ValueError):
    """A record line that is not one memd wrote (said in words, never raised past the sync job)."""


@dataclass(frozen=True)
class Record:
    id: str
    kind: str
    machine: str = ""
    when: str = ""  # the day it was forgotten (YYYY-MM-DD)
    length: int = 0  # literal: bytes
    salt: str = ""  # literal: hex
    digest: str = ""  # literal: sha256(salt + text) hex
    pattern: str = ""  # pattern: the regular expression

    def describe(self) -> str:
        """What was forgotten, in words that never hold it (nor the pattern: it may match itself)."""
        if self.kind == "literal":
            return f"a string of {self.length} byte(s)"
        if self.kind == "pattern":
            return "the matches of a pattern"
        return "every finding of the secret rules"

    def line(self) -> str:
        """The record as one trailer line."""
        bits = [f"v1 id={self.id} kind={self.kind}"]
        if self.machine:
            bits.append("machine=" + _b64(self.machine))
        if self.when:
            bits.append(f"when={self.when}")
        if self.kind == "literal":
            bits.append(f"len={self.length} salt={self.salt} sha256={self.digest}")
        elif self.kind == "pattern":
            bits.append("pattern=" + _b64(self.pattern))
        return f"{TRAILER}: " + " ".join(bits)

    def as_dict(self) -> dict[str, str | int]:
        return {k: v for k, v in self.__dict__.items() if v not in ("", 0)}


def literal(text: str, *, id: str, salt: bytes, machine: str = "", when: str = "") -> Record:
    data = text.encode("utf-8")
    return Record(id, "literal", machine, when, len(data), salt.hex(), _digest(salt, data))


def pattern(rx: str, *, id: str, machine: str = "", when: str = "") -> Record:
    return Record(id, "pattern", machine, when, pattern=rx)


def secrets(*, id: str, machine: str = "", when: str = "") -> Record:
    return Record(id, "secrets", machine, when)


def _digest(salt: bytes, data: bytes) -> str:
    return hashlib.sha256(salt + data).hexdigest()


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode("utf-8")).decode("ascii")


def _unb64(text: str) -> str:
    try:
        return base64.b64decode(text.encode("ascii"), altchars=b"-_", validate=True).decode("utf-8")
    except (binascii.Error, UnicodeError, ValueError):
        raise RecordError(f"not base64 text: {text[:40]!r}") from None


def parse(value: str) -> Record:
    """One record from its trailer's value; RecordError says why it is not one."""
    fields = value.split()
    if not fields or fields[0] != "v1":
        raise RecordError(f"an unknown record version: {value[:40]!r}")
    kv: dict[str, str] = {}
    for f in fields[1:]:
        key, eq, val = f.partition("=")
        if not eq:
            raise RecordError(f"not key=value: {f[:40]!r}")
        kv[key] = val
    rid, kind = kv.get("id", ""), kv.get("kind", "")
    if not rid or not _HEX.match(rid) or len(rid) > 64:
        raise RecordError("no record id")
    if kind not in KINDS:
        raise RecordError(f"an unknown kind {kind[:20]!r}")
    machine = _unb64(kv["machine"]) if "machine" in kv else ""
    when = kv.get("when", "")[:10]
    if kind == "literal":
        salt, digest, length = kv.get("salt", ""), kv.get("sha256", ""), kv.get("len", "")
        if not (_HEX.match(salt) and len(salt) % 2 == 0 and _HEX.match(digest) and len(digest) == 64
                and length.isdigit() and 0 < int(length) <= MAX_LITERAL):
            raise RecordError("a literal record without a valid salt, hash and length")
        return Record(rid, kind, machine, when, int(length), salt, digest)
    if kind == "pattern":
        rx = _unb64(kv.get("pattern", ""))
        if not rx:
            raise RecordError("a pattern record without its pattern")
        return Record(rid, kind, machine, when, pattern=rx)
    return Record(rid, kind, machine, when)


def records_in(message: str) -> tuple[list[Record], list[str]]:
    """The records a commit message carries, and why any line that looks like one is not."""
    out: list[Record] = []
    bad: list[str] = []
    for value in _LINE.findall(message):
        try:
            out.append(parse(value))
        except RecordError as e:
            bad.append(str(e))
    return out, bad


def map_lines(mapped: dict[str, str]) -> list[str]:
    """The commits a rewrite changed, old id to new, as trailer lines."""
    return [f"{MAP_TRAILER}: {old} {new}" for old, new in mapped.items() if old != new]


def map_in(message: str) -> dict[str, str]:
    return dict(_MAP.findall(message))


def find_literal(rec: Record, datas: Iterable[bytes]) -> bytes | None:
    """The literal a record stands for, when some data holds it: every window of its length hashed with
    its salt (one hash per byte offset: linear in the data for a given record)."""
    if rec.kind != "literal" or rec.length <= 0:
        return None
    salt, want, n = bytes.fromhex(rec.salt), bytes.fromhex(rec.digest), rec.length
    base = hashlib.sha256(salt)
    for data in datas:
        view = memoryview(data)
        for i in range(len(data) - n + 1):
            h = base.copy()
            h.update(view[i:i + n])
            if h.digest() == want:
                return bytes(view[i:i + n])
    return None


def holds_literal(rec: Record, data: bytes) -> bool:
    return find_literal(rec, (data,)) is not None
