"""The parent-worker message format and worker control: round trips, crafted messages refused, half frames and warming spares handled."""

import io
import os
import pickle
import threading

import pytest
import torch

from rewards.harness import protocol


class Evil:
    def __reduce__(self):
        return (os.system, ("touch /tmp/km-protocol-pwned",))


def test_round_trip_keeps_tensors_and_containers():
    msg = {"trials": [{"outputs": [torch.randn(3, 4), torch.arange(5)], "aliased": False, "non_dense": None}],
           "op_s": 0.5, "name": "x"}
    back = protocol.loads(protocol.dumps(msg))
    assert back["op_s"] == 0.5 and back["trials"][0]["aliased"] is False
    assert torch.equal(back["trials"][0]["outputs"][0], msg["trials"][0]["outputs"][0])
    assert back["trials"][0]["outputs"][1].dtype == torch.int64


@pytest.mark.parametrize("fmt", ["pickle", "zip", "legacy"])
def test_a_crafted_message_is_refused_not_run(fmt, tmp_path):
    if os.path.exists("/tmp/km-protocol-pwned"):
        os.remove("/tmp/km-protocol-pwned")
    if fmt == "pickle":
        data = pickle.dumps({"x": Evil()})
    else:
        buf = io.BytesIO()
        torch.save({"x": Evil()}, buf, _use_new_zipfile_serialization=fmt == "zip")
        data = buf.getvalue()
    with pytest.raises(pickle.UnpicklingError, match="(?i)weights.only|unsupported|global"):
        protocol.loads(data)
    assert not os.path.exists("/tmp/km-protocol-pwned")


# -- the memfd path: large messages cross as a sealed memfd ------------------------------------

memfd = pytest.mark.skipif(not protocol._HAVE_MEMFD, reason="memfd and SCM_RIGHTS are Linux-only")


def _pair():
    import socket
    from multiprocessing.connection import Connection

    a, b = socket.socketpair()
    return Connection(a.detach()), Connection(b.detach())


@memfd
def test_a_large_message_crosses_as_a_sealed_memfd_and_round_trips():
    a, b = _pair()
    big = {"sets": [[torch.randn(1 << 19)] for _ in range(3)], "op_s": 1.5}  # 6 MB > BIG
    assert protocol.tensor_bytes(big) > protocol.BIG
    protocol.send(a, big)
    raw = b.recv_bytes()
    assert raw == protocol._TAG  # not the payload: the bytes travel in the descriptor
    a2, b2 = _pair()
    protocol.send(a2, big)
    back = protocol.recv(b2)
    assert back["op_s"] == 1.5
    assert all(torch.equal(x[0], y[0]) for x, y in zip(back["sets"], big["sets"], strict=True))
    back["sets"][0][0].add_(1)  # a private mapping: the receiver may compute in place
    small = {"x": torch.ones(4)}
    protocol.send(a2, small)
    assert protocol.recv(b2)["x"].sum() == 4  # small ones stay inline on the same stream


def _send_fd(conn, fd):
    import socket

    conn.send_bytes(protocol._TAG)
    with protocol._sock(conn) as s:
        socket.send_fds(s, [b"F"], [fd])


@memfd
def test_an_unsealed_memfd_is_refused():
    """A sender that keeps write access could change the outputs while the parent judges them."""
    a, b = _pair()
    fd = os.memfd_create("evil", os.MFD_ALLOW_SEALING)
    with open(fd, "wb", closefd=False) as f:
        torch.save({"x": torch.zeros(1 << 19)}, f)
    _send_fd(a, fd)
    with pytest.raises(protocol.RefusedMessage, match="not sealed"):
        protocol.recv(b)
    os.close(fd)


@memfd
def test_a_descriptor_that_is_not_a_memfd_is_refused():
    a, b = _pair()
    r, w = os.pipe()
    _send_fd(a, r)
    with pytest.raises(protocol.RefusedMessage, match="not a sealable memfd"):
        protocol.recv(b)
    os.close(r), os.close(w)


@memfd
def test_a_tag_without_a_descriptor_does_not_hang_the_receiver():
    a, b = _pair()
    a.send_bytes(protocol._TAG)
    with pytest.raises(protocol.RefusedMessage, match="sent none"):
        protocol.recv(b, fd_timeout=0.2)


def test_a_worker_that_sends_half_a_frame_is_killed_at_the_deadline(monkeypatch):
    """poll() only says a byte is there: a frame header announcing 1 GB and then silence must
    end as a timeout of the phase, not a parent blocked in recv forever."""
    import subprocess
    import sys
    import time
    import types

    from rewards.harness import evaluator

    a, b = _pair()
    child = subprocess.Popen([sys.executable, "-c",
                              "import os,sys,struct,time; fd=int(sys.argv[1]); "
                              "os.write(fd, struct.pack('!i', 1 << 30) + b'PK'); time.sleep(600)",
                              str(b.fileno())], pass_fds=(b.fileno(),), start_new_session=True)
    b.close()
    w = types.SimpleNamespace(conn=a, proc=child, exit_reason=lambda: "killed",
                              kill_process=lambda: child.kill())
    monkeypatch.setattr(evaluator, "MESSAGE_GRACE_S", 1.0)
    t0 = time.perf_counter()
    with pytest.raises(evaluator.PhaseTimeout, match="did not arrive"):
        evaluator.ask(w, None, 1.0)
    assert time.perf_counter() - t0 < 10
    assert child.wait(timeout=5) != 0


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="reads process states from /proc")
def test_spares_still_warming_are_stopped_while_a_candidate_is_timed():
    """A spare's CUDA init or CUPTI start-up is GPU work: it must not overlap timed calls. An idle
    spare (its hello already sent) is left running; both end up running afterwards."""
    import subprocess
    import sys
    import types

    from rewards.harness.evaluator import _Slot

    def fake(hello: bool):
        a, b = _pair()
        if hello:
            b.send_bytes(b"hello")
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        return types.SimpleNamespace(conn=a, proc=p, alive=lambda: p.poll() is None, _keep=b)

    warming, idle = fake(False), fake(True)
    slot = _Slot.__new__(_Slot)
    slot.spares = {"candidate": [idle], "profiler": [warming]}
    slot.members, slot._mu = [idle, warming], threading.Lock()  # the slot's workers
    try:
        with slot.quiet() as stopped:
            import time

            time.sleep(0.2)
            assert stopped == [warming]
            assert _state(warming.proc.pid) == "T" and _state(idle.proc.pid) != "T"
        time.sleep(0.2)
        assert _state(warming.proc.pid) != "T"
    finally:
        for w in (warming, idle):
            w.proc.kill()
            w.proc.wait()
