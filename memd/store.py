"""The I/O edge for memory folders: bounded reads, atomic writes, no clobbering.

Writes go to a temp file in the same folder (same filesystem, so the rename is atomic),
are fsynced, and replace the target with ``os.replace``; the folder is fsynced after. The temp
name starts with ``.memd-`` and does not end in ``.md``, so Claude Code never reads it and the
watcher ignores it. A write given the signature of what was read refuses to replace a file that
changed since: the user's (or Claude Code's) newer words are never clobbered.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import stat
import time
from pathlib import Path
from typing import Any

from memd.core.paths import is_team
from memd.errors import ConflictError, MemdError
from memd.memfolder.read import Signature as Signature  # re-exported: apply checks writes with it
from memd.memfolder.read import signature_of as signature_of
from memd.memfolder.walk import confined_problem, walk

TEMP_PREFIX = ".memd-"
TEMP_SUFFIX = ".tmp"


# --------------------------------------------------------------------------- fault injection
# ``MEMD_FAULT`` (crash and fault campaigns only): comma-separated ``point[@file][:n][=action]``.
# ``point`` is a name below, ``@file`` limits it to one file's write (its name), ``:n`` fires at the
# n-th hit only (default: every hit), ``action`` is ``kill`` (SIGKILL, the default) or an errno name
# (``ENOSPC``, ``EACCES``, ``EPERM``, ``EFBIG``, ...: an OSError is raised there). Read once, at import;
# unset, a fault point costs one truth test of an empty dict.
# Points: store.write (a temp file is open, nothing written), store.before_rename (the temp is complete),
# store.after_rename (the file is replaced); apply.after_snapshot, apply.after_rename (after each file
# a run writes), apply.before_index, apply.after_delete; the history writer's (``memd.history``):
# history.init, history.init_renamed, history.after_objects, history.after_ref (``@project``), and inside
# dulwich's own lock-file writes history.gitfile_write / history.gitfile_close (``@ref``, ``@object``,
# ``@config``, ...: which file the library was writing).
FAULT_ENV = "MEMD_FAULT"


def parse_faults(spec: str) -> dict[str, tuple[int, str]]:
    """``MEMD_FAULT``'s value as {point or point@file: (n-th hit or 0 for every, action)}."""
    out: dict[str, tuple[int, str]] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        where, _, action = part.partition("=")
        point, _, nth = where.partition(":")
        name, at, file = point.partition("@")  # a file (or project) name keeps its dashes
        out[name.replace("-", "_") + at + file] = (int(nth) if nth.isdigit() else 0, action.strip() or "kill")
    return out


_FAULTS: dict[str, tuple[int, str]] = parse_faults(os.environ.get(FAULT_ENV, ""))
_FAULT_HITS: dict[str, int] = {}


def set_faults(spec: str) -> None:
    """Arm fault points in this process (tests); "" disarms them all."""
    _FAULTS.clear()
    _FAULTS.update(parse_faults(spec))
    _FAULT_HITS.clear()


def faults_armed(prefix: str) -> bool:
    """Whether any armed fault point starts with prefix (a hook that costs something is installed only then)."""
    return bool(_FAULTS) and any(k.startswith(prefix) for k in _FAULTS)


def fault(point: str, file: str = "") -> None:
    """Kill the process, or raise the armed OSError, when ``MEMD_FAULT`` arms ``point`` (see above)."""
    if not _FAULTS:
        return
    for key in (f"{point}@{file}", point) if file else (point,):
        armed = _FAULTS.get(key)
        if armed is None:
            continue
        hits = _FAULT_HITS[key] = _FAULT_HITS.get(key, 0) + 1
        nth, action = armed
        if nth and hits != nth:
            continue
        if action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        code = getattr(errno, action, errno.EIO)
        raise OSError(code, os.strerror(code), file or point)


# What a failed write means, in the words a user knows (the log keeps the errno too).
_OS_REASONS = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted (the file or its folder is immutable or protected)",
    errno.EROFS: "read-only file system",
    errno.EFBIG: "file too large (the file-size limit was reached)",
    errno.EIO: "I/O error",
    errno.ENOENT: "the folder is gone",
    errno.ENOTDIR: "a folder on the way is not a folder",
}


def os_reason(e: OSError) -> str:
    """The true reason an I/O call failed: "no space left on device", "permission denied", ..."""
    return _OS_REASONS.get(e.errno or 0) or (e.strerror or type(e).__name__).lower()


def current_signature(path: Path) -> Signature | None:
    try:
        data = path.read_bytes()
        st = path.stat()
    except OSError:
        return None
    return signature_of(data, st)


def unchanged(path: Path, expect: Signature | None) -> bool:
    """True when path still is what was read (expect None means: must not exist)."""
    now = current_signature(path)
    if expect is None:
        return now is None and not path.exists()
    return now is not None and now.sha256 == expect.sha256 and now.size == expect.size


def fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write(path: Path, data: str | bytes, *, expect: Signature | bool | None = False,
                 mode: int | None = None) -> None:
    """Write path atomically. ``expect``: the Signature read earlier (None: must not exist yet;
    False: no check). Raises ConflictError when the file changed since it was read."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    folder = path.parent
    if expect is not False and not unchanged(path, expect if isinstance(expect, Signature) else None):
        raise ConflictError("changed since it was read; not overwritten", path=str(path))
    if mode is None:
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except OSError:
            mode = 0o644
    tmp = folder / f"{TEMP_PREFIX}{path.name}.{os.getpid()}.{os.urandom(4).hex()}{TEMP_SUFFIX}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        try:
            fault("store.write", path.name)
            view = memoryview(raw)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        if expect is not False and not unchanged(path, expect if isinstance(expect, Signature) else None):
            raise ConflictError("changed while memd was writing; not overwritten", path=str(path))
        fault("store.before_rename", path.name)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fault("store.after_rename", path.name)
    fsync_dir(folder)


def read_json_dict(path: Path) -> dict[str, Any]:
    """A state file holding one JSON object, or {} when it is missing, unreadable, not JSON or not an
    object (memd's own record files: a damaged one starts over, never stops the job)."""
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def is_memd_temp(name: str) -> bool:
    return name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX)


# what atomic_write names its temp files: .memd-<name>.<pid>.<8 hex>.tmp
_TEMP_NAME = re.compile(r"^\.memd-.+\.(\d{1,10})\.[0-9a-f]{8}\.tmp$")


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (anyone's). Numbers no pid can be are not alive."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except OSError:  # EPERM: it exists, it is someone else's
        return True
    return True


def sweep_temps(folder: Path, older_than_s: float = 3600, *, now: float | None = None) -> list[str]:
    """Remove the temp files ``atomic_write`` left behind in a memory folder after a crash mid-write.

    Only regular files named as atomic_write names them (``.memd-<name>.<pid>.<hex>.tmp``) are
    removed, and only when their process is gone or they are older than ``older_than_s`` (a
    reused pid). Never anything else. The folder is walked by ``memd.memfolder.walk`` (no symlink
    followed, no hidden folder entered, bounded); nothing in ``team/`` is touched (memd never
    writes there). Returns the removed paths, relative to folder."""
    when = time.time() if now is None else now
    removed: list[str] = []
    for rel, e in walk(folder).files():
        m = _TEMP_NAME.match(e.name)
        if m is None or is_team(rel):
            continue
        try:
            st = e.stat(follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                continue
            if pid_alive(int(m.group(1))) and when - st.st_mtime < older_than_s:
                continue  # a write in progress
            os.unlink(e.path)
            removed.append(rel)
        except OSError:
            continue
    return removed


class UnsafePathError(MemdError):
    """A path in a memory folder that memd will not write through (a symlink, or leaving the folder)."""


def check_confined(root: Path, rel: str) -> Path:
    """root/rel, or UnsafePathError when it may not be touched (see ``confined_problem``)."""
    problem = confined_problem(root, rel)
    if problem is not None:
        raise UnsafePathError(f"refused: {problem}", path=str(root / rel))
    return root / rel


def make_parents_confined(root: Path, rel: str) -> Path:
    """Create the missing folders of root/rel one by one, each checked to be a plain folder (never a
    symlink) after it exists; returns root/rel. Raises UnsafePathError or OSError."""
    check_confined(root, rel)
    cur = root
    for part in rel.split("/")[:-1]:
        cur = cur / part
        with contextlib.suppress(FileExistsError):
            os.mkdir(cur)
        st = os.lstat(cur)
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            raise UnsafePathError("refused: a folder on the way is a symlink or not a folder", path=str(cur))
    return check_confined(root, rel)


def ensure_private_dir(path: Path) -> Path:
    """Create one of memd's own folders (0700)."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as e:
        raise MemdError(f"cannot create folder: {e.strerror}", path=str(path)) from None
    return path
