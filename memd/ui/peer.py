"""Whose process is at the other end of a loopback connection (Linux: ``/proc/net/tcp``).

The viewer listens on 127.0.0.1, where every user of the machine can connect; the token keeps them
out only while it stays secret, and a token can leak where the viewer cannot stop it: the browser
sends its cookie to every port of 127.0.0.1 (cookies are per host, not per port), so a page served by
another user's process on another port, opened by any web page, receives it. So the viewer also asks
the kernel who owns the connecting socket and answers only its own user's processes (the browser is
one): ``owner`` finds the client's socket in ``/proc/net/tcp`` (local address = the client's, remote =
the viewer's) and reads its uid. Where there is no ``/proc/net/tcp`` (not Linux) the answer is None and
the token alone decides (docs/ui.md, "Safety model").
"""

from __future__ import annotations

import socket
import struct

TCP_TABLE = "/proc/net/tcp"


def _hex_addr(host: str, port: int) -> str:
    """``127.0.0.1``, 8765 as /proc/net/tcp writes it: the IPv4 address as a native-order int, the port big."""
    (n,) = struct.unpack("=I", socket.inet_aton(host))
    return f"{n:08X}:{port:04X}"


def owner_in(table: str, client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid of the socket ``client`` -> ``server`` in a /proc/net/tcp text; None when it is not listed."""
    local, remote = _hex_addr(*client), _hex_addr(*server)
    for line in table.splitlines()[1:]:
        f = line.split()
        if len(f) > 7 and f[1].upper() == local and f[2].upper() == remote:
            try:
                return int(f[7])
            except ValueError:
                return None
    return None


class Unknown(Exception):
    """The table exists but does not list the connection (it went, or it is not a TCP/IPv4 one)."""


def owner(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid of the process's socket connected from ``client`` to ``server``; None where the system has no
    table to ask (not Linux). Raises ``Unknown`` when the table exists and does not list it."""
    try:
        with open(TCP_TABLE, encoding="ascii", errors="replace") as f:
            table = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise Unknown(f"{TCP_TABLE} cannot be read ({e.strerror})") from None
    uid = owner_in(table, client, server)
    if uid is None:
        raise Unknown("the connection is not in " + TCP_TABLE)
    return uid
