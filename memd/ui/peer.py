"""Whose process is at the other end of a loopback connection (Linux: ``/proc/net/tcp``).

The viewer listens on 127.0.0.1, where every user of the machine can connect; the token keeps them
out only while it stays secret, and a token can leak where the viewer cannot stop it: the browser
sends its cookie to every port of 127.0.0.1 (cookies are per host, not per port), so a page served by
another user's process on another port, opened by any web page, receives it. So the viewer also asks
the kernel who owns the connecting socket and answers only its own user's processes (the browser is
one): ``owner`` finds the client's socket in ``/proc/net/tcp`` (local address = the client's, remote =
the viewer's) and reads its uid. It asks the kernel's sock_diag netlink for that one socket first
(about 40 us); reading the whole table costs a few ms on a machine with hundreds of sockets, and is
the fallback. Where neither can be asked (not Linux) the answer is None and the token alone decides
(docs/ui.md, "Safety model").
"""

from __future__ import annotations

import errno
import os
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


NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 1
NLMSG_ERROR = 2
_NOCOOKIE = 0xFFFFFFFF
_UID_AT = 16 + 4 + 48 + 12  # nlmsghdr, then inet_diag_msg: family..retrans, the socket id, expires/rqueue/wqueue


def diag_owner(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid of the TCP socket ``client`` -> ``server`` as sock_diag (netlink) tells it: one socket looked
    up by its addresses; None when the kernel has no such socket. Raises OSError where it cannot be asked."""
    sockid = (struct.pack("!HH", client[1], server[1]) + socket.inet_aton(client[0]) + bytes(12)
              + socket.inet_aton(server[0]) + bytes(12) + struct.pack("=III", 0, _NOCOOKIE, _NOCOOKIE))
    req = struct.pack("=BBBBI", socket.AF_INET, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) + sockid
    msg = struct.pack("=IHHII", 16 + len(req), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, 1, 0) + req
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as s:
        s.settimeout(2.0)
        s.sendto(msg, (0, 0))
        data = s.recv(8192)
    if len(data) < 20:
        raise OSError("sock_diag: a short answer")
    _, kind = struct.unpack_from("=IH", data)
    if kind == NLMSG_ERROR:
        (err,) = struct.unpack_from("=i", data, 16)
        if -err == errno.ENOENT:
            return None
        raise OSError(-err, os.strerror(-err))
    if len(data) < _UID_AT + 4:
        raise OSError("sock_diag: a short answer")
    return int(struct.unpack_from("=I", data, _UID_AT)[0])


def owner(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid of the process's socket connected from ``client`` to ``server``; None where the system has
    nothing to ask (not Linux). Raises ``Unknown`` when the kernel does not list the connection."""
    if hasattr(socket, "AF_NETLINK"):
        try:
            uid = diag_owner(client, server)
        except OSError:
            pass  # netlink refused (a sandbox): the table
        else:
            if uid is None:
                raise Unknown("the kernel lists no such connection")
            return uid
    try:
        with open(TCP_TABLE, encoding="ascii", errors="replace") as f:
            table = f.read()
    except OSError:  # none (not Linux), or not for us: the token alone decides
        return None
    uid = owner_in(table, client, server)
    if uid is None:
        raise Unknown("the connection is not in " + TCP_TABLE)
    return uid


def is_own(client: tuple[str, int], server: tuple[str, int]) -> bool:
    """The connection ``client`` -> ``server`` is this user's process's (or nothing can tell: not Linux)."""
    try:
        uid = owner(client, server)
    except Unknown:
        return False
    return uid is None or uid == os.getuid()
