"""Parent<->worker transport of trial-sized messages: inline socket frames vs sealed memfds.

    python bench/protocol_transport.py --mb 320 --reps 3

A child process echoes what it receives (as the worker does with inputs and outputs); the
parent times send + receive of one message of --mb MB of float32 tensors (5 tensors, as 5
trials) both ways. Inline: torch.save to bytes, the socket, bytes back to tensors. memfd: one
torch.save into a sealed memfd, the descriptor over the socket, an mmap on the other side.
Prints the median round trip of each and the ratio.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from multiprocessing.connection import Connection

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from rewards.harness import protocol  # noqa: E402


def child(fd: int) -> None:
    conn = Connection(fd)
    while True:
        try:
            msg = protocol.recv(conn)
        except EOFError:
            return
        protocol.BIG = msg.pop("big")  # the mode under test, both ways
        protocol.send(conn, msg)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=320)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    if not protocol._HAVE_MEMFD:
        sys.exit("memfd transport needs Linux (os.memfd_create, socket.send_fds)")
    p, c = socket.socketpair()
    proc = subprocess.Popen([sys.executable, __file__, "--child", str(c.fileno())], pass_fds=(c.fileno(),))
    c.close()
    conn = Connection(p.detach())
    n = a.mb * (1 << 20) // 4 // 5
    msg = {"outputs": [torch.randn(n) for _ in range(5)]}
    res = {}
    for mode, big in (("inline", 1 << 62), ("memfd", 1 << 20)):
        ts = []
        for _ in range(a.reps):
            protocol.BIG = big
            t0 = time.perf_counter()
            protocol.send(conn, {**msg, "big": big})
            back = protocol.recv(conn)
            ts.append(time.perf_counter() - t0)
            assert torch.equal(back["outputs"][4], msg["outputs"][4])
        res[mode] = statistics.median(ts)
        print(f"{mode:7s} {a.mb} MB there and back: median {res[mode]:.3f} s over {a.reps}")
    conn.close()
    proc.wait(timeout=30)
    print(f"ratio inline/memfd: {res['inline'] / res['memfd']:.2f}x")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(int(sys.argv[2]))
    else:
        main()
