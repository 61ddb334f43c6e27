"""Messages between the parent and workers: torch.save frames, read back with weights_only.

weights_only unpickling accepts tensors and plain containers only, so a candidate that
controls its worker cannot run code in the parent by crafting a message.
"""

from __future__ import annotations

import io
from typing import Any

import torch


def dumps(obj: Any) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def loads(data: bytes) -> Any:
    return torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")


def send(conn, obj: Any) -> None:
    conn.send_bytes(dumps(obj))


def recv(conn) -> Any:
    return loads(conn.recv_bytes())
