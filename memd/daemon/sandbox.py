"""Whether this machine lets a user's service manager sandbox memd with namespaces.

In a user unit, systemd's file-system sandboxing (``ProtectSystem=``, ``PrivateTmp=``, ``ReadWritePaths=``,
``ProtectKernel*=``, ``PrivateDevices=``, …) needs a mount namespace, and an unprivileged user manager can
only make one inside a user namespace (``PrivateUsers=``, implied for user units since systemd 253).
Some machines refuse unprivileged user namespaces: Ubuntu 23.10+ through AppArmor
(``kernel.apparmor_restrict_unprivileged_userns = 1``, the default in 24.04), kernels built or set
without them (``user.max_user_namespaces = 0``, Debian's old ``kernel.unprivileged_userns_clone = 0``).
There a sandboxed unit either fails at the NAMESPACE/USER step or, with some systemd versions, starts
with the sandbox silently not applied: neither is acceptable, so ``memd service install`` asks first.

The probe does what the user manager would do, in a throwaway child process (systemd's own test suite
was advised the same: try it, do not guess from sysctls): a user namespace with the caller's uid
mapped, a private mount namespace, ``/`` made recursively private, a tmpfs mounted (what
``PrivateTmp=`` does). The sysctls are read first only to name the reason.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# Run with ``python -I`` in a fresh process: unshare() changes the calling process for good.
_PROBE = r"""
import ctypes, os, sys, tempfile
CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_REC, MS_PRIVATE = 16384, 1 << 18
libc = ctypes.CDLL(None, use_errno=True)
uid, gid = os.getuid(), os.getgid()
def fail(step):
    e = ctypes.get_errno()
    print(step + ": " + os.strerror(e), file=sys.stderr)
    sys.exit(1)
if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
    fail("cannot create a user namespace")
try:
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{gid} {gid} 1")
except OSError as e:
    print("cannot map the user into a user namespace: " + (e.strerror or str(e)), file=sys.stderr)
    sys.exit(1)
if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
    fail("cannot make a private mount namespace")
d = tempfile.mkdtemp()
try:
    if libc.mount(b"tmpfs", d.encode(), b"tmpfs", 0, None) != 0:
        fail("cannot mount in a user namespace")
    libc.umount2(d.encode(), 2)
finally:
    os.rmdir(d)
"""


def _sysctl(name: str) -> str | None:
    try:
        return (Path("/proc/sys") / name.replace(".", "/")).read_text().strip()
    except OSError:
        return None


def known_restriction() -> str | None:
    """A restriction the sysctls name, or None (the probe still decides)."""
    if _sysctl("kernel.apparmor_restrict_unprivileged_userns") == "1":
        return ("AppArmor restricts unprivileged user namespaces "
                "(kernel.apparmor_restrict_unprivileged_userns = 1, the default on Ubuntu 24.04)")
    if _sysctl("kernel.unprivileged_userns_clone") == "0":
        return "unprivileged user namespaces are off (kernel.unprivileged_userns_clone = 0)"
    if _sysctl("user.max_user_namespaces") == "0":
        return "user namespaces are off (user.max_user_namespaces = 0)"
    return None


def namespaces_refused() -> str | None:
    """Why a user unit's namespace sandboxing would not work here, or None when it would."""
    if not sys.platform.startswith("linux"):
        return "not Linux"
    known = known_restriction()
    if known:
        return known
    try:
        p = subprocess.run([sys.executable, "-I", "-S", "-c", _PROBE], capture_output=True, text=True,
                           timeout=10, cwd="/")
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"the namespace probe did not run ({e})"
    if p.returncode != 0:
        return (p.stderr.strip().splitlines() or [f"the namespace probe failed (exit {p.returncode})"])[-1]
    return None
