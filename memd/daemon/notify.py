"""systemd's notify protocol (sd_notify) with the stdlib: one datagram to $NOTIFY_SOCKET.

Used for READY=1 once the watcher runs, WATCHDOG=1 pings from the main loop (so a hung loop gets
restarted), STATUS= lines and STOPPING=1. Outside systemd (no $NOTIFY_SOCKET) every call is a no-op.
"""

from __future__ import annotations

import os
import socket


def notify(message: str) -> bool:
    """Send one notification; False when not under systemd or the socket is gone (never raises)."""
    addr = os.environ.get("NOTIFY_SOCKET", "")
    if not addr:
        return False
    if addr.startswith("@"):  # abstract namespace
        addr = "\0" + addr[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
            s.connect(addr)
            s.sendall(message.encode("utf-8"))
    except OSError:
        return False
    return True


def watchdog_interval() -> float | None:
    """Seconds between WATCHDOG=1 pings (half of WatchdogSec), or None when no watchdog is asked for."""
    usec = os.environ.get("WATCHDOG_USEC", "")
    pid = os.environ.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) <= 0:
        return None
    if pid and pid.isdigit() and int(pid) != os.getpid():
        return None
    return int(usec) / 1_000_000 / 2
