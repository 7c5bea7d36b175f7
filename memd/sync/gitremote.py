"""memd's sync repository and the git remote behind it (the I/O edge).

The sync repository is a bare git repository in memd's state folder (``state_dir/sync/repo.git``),
never in a memory folder. dulwich reads and writes its objects; the system ``git`` moves them to and
from the user's remote (``fetch``/``push``), because only it honours everything the user has set up
for their other repositories: ``~/.ssh/config``, ssh agents, ``url.*.insteadOf``, credential
helpers, proxies (see docs/sync.md for the choice). A remote is given on each command line, never
stored, so a changed config takes effect at once.

Refs of one identity's branch ``memory/<identity>``:
- ``refs/remotes/origin/<branch>``: the remote's head, as the last fetch saw it;
- ``refs/memd/shared/<branch>``: the last commit this machine knows the remote had (pushed by us, or
  fetched and found to hold nothing we lacked): a remote head that does not descend from it was
  rewritten (force-pushed) or the branch deleted;
- ``refs/memd/mine/<branch>``: the last commit made of this machine's folder (pushed or not): the
  merge base of it and the remote's head is "the last commit both sides shared".

Whose remote it is: memd pushes only into a remote that is empty or already memd's. memd's remotes
carry a marker branch (``MARKER_REF``, one commit with a README, the same commit id from every machine),
pushed with the first push into an empty remote; a remote with nothing but ``memory/*`` branches (made
before the marker existed) is memd's too. Anything else (a code repository's ``main``) is refused with
what was found (``whose``). A remote found to be memd's is remembered (``sync/remotes.json``), so a
sync with nothing new stays one fetch.

Errors are ``SyncError`` with a ``kind`` (unreachable, auth, rejected, corrupt, rewritten, git,
timeout, hook) and a message that says what happened in words; git's own text is appended, cut short
(a server's refusal quotes what the server said: its ``remote:`` lines). git runs in a process group
of its own: after a timeout the whole group is killed and reaped (ssh, git-remote-https, a credential
helper never outlive it).
"""

from __future__ import annotations

import os
import re
import socket
import stat
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memd.core.paths import INDEX_NAME, is_team, is_topic
from memd.errors import MemdError

REPO_NAME = "repo.git"
BRANCH_PREFIX = "memory/"
FETCH_SPEC = f"+refs/heads/{BRANCH_PREFIX}*:refs/remotes/origin/{BRANCH_PREFIX}*"
_REMOTE = REMOTE_REF = "refs/remotes/origin/"
_SHARED = SHARED_REF = "refs/memd/shared/"
_MINE = "refs/memd/mine/"
MAX_GIT_OUTPUT = 400
MARKER_REF = "refs/heads/memd-sync"
MARKER_README = (b"# memd's memory\n\nThis repository holds Claude Code memory synced by memd between one user's "
                 b"machines:\none branch `memory/<identity>` per project. Keep it private. See memd's docs/sync.md.\n")


class SyncError(MemdError):
    def __init__(self, message: str, *, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


def repo_path(state_dir: Path) -> Path:
    return state_dir / "sync" / REPO_NAME


def open_repo(state_dir: Path) -> Any:
    """The sync repository, made on first use (bare, private)."""
    from dulwich.repo import Repo

    path = repo_path(state_dir)
    if (path / "HEAD").exists():
        return Repo(str(path))
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        return Repo.init_bare(str(path))
    except FileExistsError:
        return Repo(str(path))


# --------------------------------------------------------------------------- the system git

_KINDS: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    ("rejected", "the remote refused the push (someone pushed first)",
     re.compile(r"\[rejected\]|non-fast-forward|fetch first|failed to update ref|cannot lock ref|"
                r"incorrect old value", re.I)),
    ("hook", "the remote's server refused the push",  # a pre-receive hook, a quota, a protected branch
     re.compile(r"\[remote rejected\]|hook declined", re.I)),
    ("auth", "the remote refused our credentials",
     re.compile(r"authentication failed|permission denied|could not read (username|password)|"
                r"\b40[13]\b|access denied|terminal prompts disabled|host key verification failed", re.I)),
    ("corrupt", "the remote's repository is damaged (an object is missing or broken)",
     re.compile(r"bad object|did not send all necessary objects|index-pack failed|unpack failed|"
                r"corrupt|missing (blob|tree|commit)|protocol error|invalid (object|index)|loose object", re.I)),
    ("unreachable", "the remote cannot be reached (offline, or the address is wrong)",
     re.compile(r"could not resolve|connection (refused|timed out|reset)|network is unreachable|"
                r"unable to access|does not appear to be a git repository|could not read from remote|"
                r"no route to host|failed to connect|not found|unable to connect", re.I)),
)


@dataclass(frozen=True)
class GitResult:
    code: int
    out: str
    err: str


def _env(interactive: bool) -> dict[str, str]:
    env = dict(os.environ)
    env["LC_ALL"] = "C"  # git's messages are matched below
    env["GIT_TERMINAL_PROMPT"] = "1" if interactive else "0"  # the daemon never waits for a prompt
    if not interactive:  # nor does ssh pop up a passphrase window; the user's ssh config stays in charge
        env["GCM_INTERACTIVE"] = "never"
        env["SSH_ASKPASS_REQUIRE"] = "never"
    return env


def git(state_dir: Path, args: list[str], *, timeout: float, interactive: bool = False) -> GitResult:
    """``git --git-dir=<sync repository> <args>`` with a bound; raises SyncError when git is missing or slow."""
    cmd = ["git", f"--git-dir={repo_path(state_dir)}", *args]
    try:
        # Unattended, git gets a session of its own (no terminal to prompt on either): a timeout kills its
        # whole group. In a terminal it stays in the user's session so that it may prompt.
        p = subprocess.Popen(cmd, stdin=None if interactive else subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=_env(interactive), start_new_session=not interactive)
    except FileNotFoundError:
        raise SyncError("the `git` program is not installed (sync moves memory with it)", kind="git") from None
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(p, group=not interactive)
        raise SyncError(f"git {args[0]} took longer than {timeout:g} s (offline, or the remote is slow)",
                        kind="timeout") from None
    except BaseException:
        _kill(p, group=not interactive)
        raise
    return GitResult(p.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))


def _kill(p: subprocess.Popen[bytes], *, group: bool) -> None:
    """git and, unattended, every helper it started (its process group), killed and reaped."""
    import signal

    try:
        if group:
            os.killpg(p.pid, signal.SIGKILL)
        else:
            p.kill()
    except (ProcessLookupError, PermissionError):
        pass
    try:
        p.communicate(timeout=10)
    except subprocess.TimeoutExpired:  # a helper that left git's group still holds the pipes: stop reading
        p.kill()
        p.wait()


def _failure(what: str, r: GitResult, remote: str) -> SyncError:
    text = (r.err + "\n" + r.out).strip()
    kind, words = next(((k, w) for k, w, rx in _KINDS if rx.search(text)), ("git", "git failed"))
    said = [ln.strip()[len("remote:"):].strip() for ln in r.err.splitlines() if ln.strip().startswith("remote:")]
    said = [ln for ln in said if ln]
    if kind == "hook" and said:
        return SyncError(f"{what} {remote}: {words}; the server said: {' '.join(said)[-MAX_GIT_OUTPUT:]}", kind=kind)
    tail = " ".join(text.split())[-MAX_GIT_OUTPUT:]
    return SyncError(f"{what} {remote}: {words} (git: {tail})", kind=kind)


def fetch(state_dir: Path, remote: str, *, timeout: float, interactive: bool = False) -> None:
    """One fetch of every memory branch of the remote (refs it deleted are pruned here too)."""
    open_repo(state_dir).close()
    r = git(state_dir, ["fetch", "--quiet", "--prune", "--no-tags", "--no-write-fetch-head",
                        "--no-recurse-submodules", remote, FETCH_SPEC], timeout=timeout, interactive=interactive)
    if r.code != 0:
        raise _failure("fetch from", r, remote)


def push(state_dir: Path, remote: str, commit: str, branch: str, *, timeout: float,
         interactive: bool = False) -> None:
    """Push one commit as the branch's new head (a fast-forward only: never forced)."""
    r = git(state_dir, ["push", "--porcelain", "--no-verify", remote, f"{commit}:refs/heads/{branch}"],
            timeout=timeout, interactive=interactive)
    if r.code != 0 or "[rejected]" in r.out or "[remote rejected]" in r.out:
        raise _failure("push to", r, remote)


# --------------------------------------------------------------------------- offline, said in status


def _offline_path(state_dir: Path) -> Path:
    return state_dir / "sync" / "offline.json"


def note_fetch(state_dir: Path, error: SyncError | None, now: float) -> None:
    """Record a failed fetch (its words, since when, how many in a row) for ``memd status``; a fetch that
    worked clears it."""
    import json

    from memd.store import atomic_write, read_json_dict

    path = _offline_path(state_dir)
    if error is None:
        if path.exists():
            path.unlink(missing_ok=True)
        return
    was = read_json_dict(path)
    row = {"since": was.get("since", now), "last": now, "failures": int(was.get("failures", 0)) + 1,
           "kind": error.kind, "reason": str(error)}
    atomic_write(path, json.dumps(row, indent=1) + "\n", mode=0o600)


def offline_line(state_dir: Path) -> str:
    """``memd status``'s sync line while the remote cannot be fetched ("" when the last fetch worked)."""
    from memd.store import read_json_dict

    row = read_json_dict(_offline_path(state_dir))
    if not row.get("reason"):
        return ""
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(float(row.get("since", 0))))
    n = int(row.get("failures", 1))
    return (f"sync: every project: not synced since {when} ({n} sync(s) in a row could not fetch): {row['reason']}; "
            "local memory untouched; the next sync tries again\n")


# --------------------------------------------------------------------------- whose remote it is


def _remotes_path(state_dir: Path) -> Path:
    return state_dir / "sync" / "remotes.json"


def known_ours(state_dir: Path) -> set[str]:
    import json

    try:
        data = json.loads(_remotes_path(state_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    return {str(u) for u in data.get("memd", [])} if isinstance(data, dict) else set()


def _remember_ours(state_dir: Path, remote: str) -> None:
    import json

    from memd.store import atomic_write

    urls = sorted(known_ours(state_dir) | {remote})
    atomic_write(_remotes_path(state_dir), json.dumps({"memd": urls}, indent=1) + "\n", mode=0o600)


def foreign(refs: list[str]) -> list[str]:
    """The refs of a remote that are not memd's (HEAD, the marker and ``memory/*`` branches are)."""
    return [r for r in refs if r != "HEAD" and r != MARKER_REF and not r.startswith("refs/heads/" + BRANCH_PREFIX)]


def whose(state_dir: Path, remote: str, *, machine: str, timeout: float, interactive: bool = False,
          dry_run: bool = False) -> str | None:
    """None when the remote is memd's (an empty one gets the marker first, unless ``dry_run``); else why memd
    may not push there."""
    if remote in known_ours(state_dir):
        return None
    r = git(state_dir, ["ls-remote", remote], timeout=timeout, interactive=interactive)
    if r.code != 0:
        raise _failure("list the branches of", r, remote)
    refs = [ln.split("\t", 1)[1].strip() for ln in r.out.splitlines() if "\t" in ln]
    other = foreign(refs)
    if other:
        shown = ", ".join(other[:5]) + (f" and {len(other) - 5} more" if len(other) > 5 else "")
        marker = (f"beside memd's marker ({MARKER_REF}): a code repository that a memd once marked, or a remote "
                  "shared with other work" if MARKER_REF in refs else f"and no memd marker ({MARKER_REF})")
        return (f"the remote {remote} is not memd's: it holds {shown} {marker}; "
                "memd pushes memory only into an empty repository or one of its own (make an empty private "
                "repository for it: docs/sync.md)")
    if dry_run:
        return None
    if MARKER_REF not in refs:
        repo = open_repo(state_dir)
        try:
            marker = commit(repo, {"README.md": MARKER_README}, None, machine="memd", summary="memd's memory",
                            now=0)
        finally:
            repo.close()
        r = git(state_dir, ["push", "--porcelain", "--no-verify", remote, f"{marker}:{MARKER_REF}"],
                timeout=timeout, interactive=interactive)
        if r.code != 0 and "[rejected]" not in r.out:  # rejected: another machine's marker is there first
            raise _failure("mark as memd's", r, remote)
    _remember_ours(state_dir, remote)
    return None


# --------------------------------------------------------------------------- refs and commits


def _get(repo: Any, ref: str) -> str | None:
    try:
        return str(repo.refs[ref.encode()].decode("ascii"))
    except KeyError:
        return None


def _set(repo: Any, ref: str, commit: str | None) -> None:
    if commit is None:
        repo.refs.remove_if_equals(ref.encode(), None)
    else:
        repo.refs[ref.encode()] = commit.encode("ascii")


@dataclass
class Heads:
    remote: str | None
    shared: str | None
    mine: str | None


def heads(repo: Any, branch: str) -> Heads:
    return Heads(_get(repo, _REMOTE + branch), _get(repo, _SHARED + branch), _get(repo, _MINE + branch))


def all_refs(repo: Any) -> dict[str, str]:
    """Every ref of the sync repository (name -> commit), read at once (loose and packed)."""
    return {k.decode("utf-8", "replace"): v.decode("ascii") for k, v in repo.get_refs().items()}


def not_a_commit(repo: Any, branch: str, commit: str | None) -> SyncError | None:
    """Why the remote's head of a branch cannot be read (None: it is a commit, or there is none): a ref that
    points at a tree, a blob or a tag, or at an object the fetch did not bring (the remote is damaged)."""
    if commit is None:
        return None
    try:
        kind = repo[commit.encode("ascii")].type_name.decode("ascii")
    except (KeyError, ValueError):
        kind = None
    if kind == "commit":
        return None
    what = f"points at a {kind}, not a commit" if kind else "points at an object the remote did not send"
    return SyncError(f"the remote's branch {branch} {what} ({commit[:12]}): the remote is damaged or was written "
                     "by something other than memd; fix or delete that branch on the remote (its commits, if any, "
                     "are in the remote's reflog)", kind="corrupt")


def remember(repo: Any, branch: str, *, shared: str | None = None, mine: str | None = None) -> None:
    if shared is not None:
        _set(repo, _SHARED + branch, shared)
    if mine is not None:
        _set(repo, _MINE + branch, mine)


def forget(repo: Any, branch: str) -> bool:
    """Forget what this machine shared with the remote on a branch (``memd sync --forget``)."""
    h = heads(repo, branch)
    _set(repo, _SHARED + branch, None)
    _set(repo, _MINE + branch, None)
    return h.shared is not None or h.mine is not None


def _oid(commit: str) -> Any:
    """A commit id as dulwich takes it (its ``ObjectID``: hex bytes)."""
    return commit.encode("ascii")


def descends(repo: Any, ancestor: str, commit: str) -> bool:
    from dulwich.graph import can_fast_forward

    try:
        return bool(can_fast_forward(repo, _oid(ancestor), _oid(commit)))
    except KeyError:
        return False


def merge_base(repo: Any, a: str, b: str) -> str | None:
    from dulwich.graph import find_merge_base

    try:
        found = find_merge_base(repo, [_oid(a), _oid(b)])
    except KeyError:
        return None
    return found[0].decode("ascii") if found else None


@dataclass
class TreeFiles:
    files: dict[str, bytes] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)  # entries no memory folder may hold, with why
    machine: str = ""  # who made the commit (its trailer)
    # the ignored entries as they are (raw path -> mode, object id): a push keeps them untouched, so a
    # file this machine cannot read (its size limit, a name it cannot decode) is never deleted remotely
    kept: dict[bytes, tuple[int, bytes]] = field(default_factory=dict)


def synced(rel: str) -> bool:
    """A file sync carries: the index and the topic files, never team/ (Claude Code syncs it)."""
    return not is_team(rel) and (rel == INDEX_NAME or is_topic(rel))


def files_of(repo: Any, commit: str | None, max_bytes: int) -> TreeFiles:
    """The memory files of a commit of the remote, checked: a path no memory folder may hold, a name
    that is not UTF-8, a symlink, a submodule, a file too large or not UTF-8 is left out, named in
    ``ignored`` and kept as it is in ``kept``. A missing object is a damaged remote (``SyncError`` corrupt)."""
    out = TreeFiles()
    if commit is None:
        return out
    try:
        c = repo[commit.encode()]
        if c.type_name != b"commit":
            raise SyncError(f"the remote's {commit[:12]} is a {c.type_name.decode('ascii')}, not a commit: the "
                            "remote is damaged", kind="corrupt")
        out.machine = _trailer(c.message.decode("utf-8", "replace"), "machine")
        _walk(repo, c.tree, "", b"", out, max_bytes)
    except KeyError as e:
        raise SyncError(f"the remote's commit {commit[:12]} lacks an object ({e}): the remote is damaged",
                        kind="corrupt") from None
    return out


def _walk(repo: Any, tree_id: bytes, prefix: str, raw: bytes, out: TreeFiles, max_bytes: int) -> None:
    for entry in repo[tree_id].items():
        key = raw + entry.path

        def ignore(why: str, rel: str) -> None:
            out.ignored.append(f"{rel}: {why}")
            out.kept[key] = (entry.mode, entry.sha)  # noqa: B023 (used at once, in this iteration)

        try:
            name = entry.path.decode("utf-8")
        except UnicodeDecodeError:
            ignore("a name that is not UTF-8", repr(prefix + entry.path.decode("utf-8", "replace")))
            continue
        rel = prefix + name
        if name in ("", ".", "..") or "/" in name or "\\" in name or "\x00" in name:
            ignore("not a file name", repr(rel))
        elif stat.S_ISDIR(entry.mode):
            if is_team(rel) or name.startswith("."):
                ignore("never synced", rel + "/")
            else:
                _walk(repo, entry.sha, rel + "/", key + b"/", out, max_bytes)
        elif not stat.S_ISREG(entry.mode):
            ignore("not a regular file", rel)
        elif not synced(rel):
            ignore("not a memory file sync carries", rel)
        else:
            data = bytes(repo[entry.sha].data)
            if len(data) > max_bytes:
                ignore(f"larger than {max_bytes} bytes", rel)
                continue
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                ignore("not UTF-8 text", rel)
                continue
            out.files[rel] = data


def _trailer(message: str, name: str) -> str:
    m = re.search(rf"^memd-{name}:\s*(.*)$", message, re.M)
    return m.group(1).strip() if m else ""


def _tree(repo: Any, files: dict[str, bytes], kept: dict[bytes, tuple[int, bytes]]) -> bytes:
    """A tree of ``files`` plus the entries ``kept`` as they are (a kept entry wins its path)."""
    from dulwich.objects import Blob, Tree

    root: dict[bytes, Any] = {}

    def put(path: bytes, leaf: Any) -> None:
        *dirs, name = path.split(b"/")
        node = root
        for d in dirs:
            nxt = node.get(d)
            if not isinstance(nxt, dict):
                nxt = node[d] = {}
            node = nxt
        if path in kept or name not in node:
            node[name] = leaf

    for path, entry in kept.items():
        put(path, entry)
    for rel, data in files.items():
        put(rel.encode("utf-8"), data)

    def build(node: dict[bytes, Any]) -> Any:  # an ObjectID
        tree = Tree()
        for name, value in node.items():
            if isinstance(value, dict):
                tree.add(name, 0o040000, build(value))
            elif isinstance(value, tuple):
                tree.add(name, value[0], value[1])
            else:
                blob = Blob.from_string(value)
                repo.object_store.add_object(blob)
                tree.add(name, 0o100644, blob.id)
        repo.object_store.add_object(tree)
        return tree.id

    return bytes(build(root))


def commit(repo: Any, files: dict[str, bytes], parent: str | None, *, machine: str, summary: str,
           now: float | None = None, kept: dict[bytes, tuple[int, bytes]] | None = None) -> str:
    """A commit of ``files`` (and the remote's entries ``kept`` as they are) on top of ``parent``,
    signed with the machine's name; returns its id."""
    from dulwich.objects import Commit

    c = Commit()
    c.tree = _tree(repo, files, kept or {})
    c.parents = [_oid(parent)] if parent else []
    who = re.sub(r"[^A-Za-z0-9._-]+", "-", machine) or "machine"
    c.author = c.committer = f"memd on {machine} <memd@{who}>".encode()
    t = int(time.time() if now is None else now)
    c.author_time = c.commit_time = t
    c.author_timezone = c.commit_timezone = 0
    c.encoding = b"UTF-8"
    c.message = f"{summary.strip() or 'sync'}\n\nmemd-machine: {machine}\nmemd-kind: sync\n".encode()
    repo.object_store.add_object(c)
    return str(c.id.decode("ascii"))


# --------------------------------------------------------------------------- nothing new since


def folder_mark(memory_dir: Path) -> str | None:
    """The folder's files by their metadata only (``memfolder.folder.fingerprint``, no reads), hashed."""
    import hashlib

    from memd.memfolder.folder import fingerprint

    fp = fingerprint(memory_dir)
    return None if fp is None else hashlib.sha256(repr(fp).encode("utf-8", "surrogateescape")).hexdigest()


def _seen_path(state_dir: Path) -> Path:
    return state_dir / "sync" / "seen.json"


def seen(state_dir: Path) -> dict[str, Any]:
    """Per project, the remote head and the folder's mark as the last complete sync left them."""
    from memd.store import read_json_dict

    return read_json_dict(_seen_path(state_dir))


def folder_id(memory_dir: Path) -> str | None:
    """The memory folder itself (device and inode): a folder removed and made again has another one."""
    try:
        st = os.stat(memory_dir)
    except OSError:
        return None
    return f"{st.st_dev}:{st.st_ino}"


def mark_seen(state_dir: Path, project: str, branch: str, remote: str | None, folder: str | None,
              folder_ident: str | None = None, names: list[str] | None = None) -> None:
    import json

    from memd.store import atomic_write

    data = seen(state_dir)
    if remote is None or folder is None:
        data.pop(project, None)
    else:
        data[project] = {"branch": branch, "remote": remote, "folder": folder}
        if folder_ident is not None:
            data[project]["dir"] = folder_ident
        if names is not None:
            data[project]["files"] = sorted(names)
    atomic_write(_seen_path(state_dir), json.dumps(data, indent=1, sort_keys=True) + "\n", mode=0o600)


def report_once(state_dir: Path, project: str, ignored: list[str]) -> list[str]:
    """Of the remote's entries this machine leaves alone, those not reported before (remembered per project)."""
    import json

    from memd.store import atomic_write

    path = state_dir / "sync" / "ignored.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    before = set(data.get(project) or [])
    fresh = [i for i in ignored if i not in before]
    if set(ignored) != before:
        if ignored:
            data[project] = sorted(set(ignored))
        else:
            data.pop(project, None)
        atomic_write(path, json.dumps(data, indent=1, sort_keys=True) + "\n", mode=0o600)
    return fresh


def ignored_lines(state_dir: Path, projects: list[str] | None = None) -> str:
    """``memd status``'s lines for the remote's entries this machine leaves alone (a binary ``*.md``, a file
    over its size limit, a name it cannot decode), per project, while the remote holds them ("" when none):
    the other machines' files, said here, not only in the log (issue 33 #5)."""
    from memd.store import read_json_dict

    out = []
    for name, rows in sorted(read_json_dict(state_dir / "sync" / "ignored.json").items()):
        if not rows or not isinstance(rows, list) or (projects is not None and name not in projects):
            continue
        shown = "; ".join(str(r) for r in rows[:3]) + (f" and {len(rows) - 3} more" if len(rows) > 3 else "")
        out.append(f"sync: {name}: {len(rows)} file(s) of the remote left alone here, kept there untouched "
                   f"({shown}); fix them on the machine that wrote them\n")
    return "".join(out)


def tree_of(repo: Any, commit: str | None) -> str | None:
    if commit is None:
        return None
    return str(repo[commit.encode()].tree.decode("ascii"))


def machine_name(machine: str) -> str:
    """The configured machine name, else the host's name (its first label). Here, below the sync job and
    forget, so both read it without importing each other (issue 35: no import circle)."""
    return machine.strip() or socket.gethostname().split(".")[0] or "machine"
