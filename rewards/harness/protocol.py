"""Messages between the parent and workers: torch.save frames, read back with weights_only.

weights_only unpickling accepts tensors and plain containers only, so a candidate that
controls its worker cannot run code in the parent by crafting a message.

Small messages travel inline on the socket. A message carrying more than ``BIG`` bytes of
tensors (trial inputs and outputs: hundreds of MB) is written once into a sealed memfd whose
descriptor crosses the socket (SCM_RIGHTS); the receiver maps it instead of copying it through
the socket several times. The receiver checks the seals (no write, no resize) before it reads,
so the sender cannot change the bytes under it; anything else (an fd that is not a sealed
memfd, a tag with no fd) is refused like an unreadable message.
"""

from __future__ import annotations

import io
import os
import select
import socket
import sys
from typing import Any

import torch

BIG = 1 << 20  # tensor bytes above which a message goes through a memfd
_TAG = b"KM-MEMFD"  # an inline frame with exactly these bytes announces a descriptor
_HAVE_MEMFD = sys.platform.startswith("linux") and hasattr(os, "memfd_create") and hasattr(socket, "send_fds")
if _HAVE_MEMFD:
    import fcntl

    _SEALS = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE


class RefusedMessage(ValueError):
    """A message the receiver will not read (a descriptor that is missing or not sealed)."""


def dumps(obj: Any) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def loads(data: bytes) -> Any:
    return torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")


def tensor_bytes(obj: Any) -> int:
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(v) for v in obj)
    return 0


def _sock(conn) -> socket.socket:
    # a second socket object on a dup of the connection's descriptor: same stream, own fd
    return socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, fileno=os.dup(conn.fileno()))


class Sealed:
    """One message written into a sealed memfd, to be sent any number of times (a task's inputs
    go to every candidate's worker: serialized once). Linux only; close() when done."""

    def __init__(self, obj: Any):
        if not _HAVE_MEMFD:
            raise OSError("sealed messages need Linux (memfd_create, SCM_RIGHTS)")
        self.fd = os.memfd_create("km-msg", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            with open(self.fd, "wb", closefd=False) as f:
                torch.save(obj, f)
            fcntl.fcntl(self.fd, fcntl.F_ADD_SEALS, _SEALS)
        except BaseException:
            self.close()
            raise

    def dup(self) -> Sealed:
        """Another handle on the same sealed file, closed by whoever sends it."""
        other = object.__new__(Sealed)
        other.fd = os.dup(self.fd)
        return other

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # descriptors in flight keep the file alive for their receivers
            self.fd = -1


def send(conn, obj: Any) -> None:
    if isinstance(obj, Sealed):
        conn.send_bytes(_TAG)
        with _sock(conn) as s:
            socket.send_fds(s, [b"F"], [obj.fd])
    elif not _HAVE_MEMFD or tensor_bytes(obj) <= BIG:
        conn.send_bytes(dumps(obj))
    else:
        msg = Sealed(obj)
        try:
            send(conn, msg)
        finally:
            msg.close()


def recv(conn, fd_timeout: float = 30.0) -> Any:
    data = conn.recv_bytes()
    if data != _TAG:
        return loads(data)
    if not _HAVE_MEMFD:
        raise RefusedMessage("a memfd message on a platform without memfd")
    with _sock(conn) as s:
        if not select.select([s], [], [], fd_timeout)[0]:
            raise RefusedMessage(f"announced a memfd but sent none within {fd_timeout:.0f} s")
        msg, fds, _, _ = socket.recv_fds(s, 1, 4)
    if not msg:
        for fd in fds:
            os.close(fd)
        raise EOFError("connection closed while a memfd was announced")
    try:
        if msg != b"F" or len(fds) != 1:
            raise RefusedMessage(f"expected one descriptor after the memfd tag, got {len(fds)}")
        try:
            seals = fcntl.fcntl(fds[0], fcntl.F_GET_SEALS)
        except OSError as e:  # not a memfd (a pipe, a regular file): no seals to check
            raise RefusedMessage(f"the descriptor is not a sealable memfd ({e.strerror})") from e
        if seals & _SEALS != _SEALS:
            raise RefusedMessage("the memfd is not sealed against writes and resizing")
        # mmap: the tensors are views of the sealed pages (private mapping: writes copy)
        return torch.load(f"/proc/self/fd/{fds[0]}", weights_only=True, mmap=True, map_location="cpu")
    finally:
        for fd in fds:
            os.close(fd)
