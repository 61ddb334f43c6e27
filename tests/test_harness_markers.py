"""Both profiler runs (evidence and system profile) bracket each forward the way
``kernels.hidden_work`` reads it; an unbracketed trace flagged a joined side stream on the H200."""

import torch

from rewards.harness import kernels, sysprof


def test_bracketed_calls_layout(monkeypatch):
    seq = []
    monkeypatch.setattr(torch.cuda, "_sleep", lambda n: seq.append("mark"))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: seq.append("sync"))
    kernels.bracketed_calls(lambda x: seq.append("fwd"), [1], 3)
    assert seq == ["mark", "fwd", "mark", "sync"] * 3


def test_system_capture_uses_the_brackets():
    import inspect

    assert "bracketed_calls(" in inspect.getsource(sysprof.record)


def _k(name, ts, dur, stream):
    return {"cat": "kernel", "name": name, "ts": ts, "dur": dur, "args": {"stream": stream}}


def test_joined_side_stream_in_bracketed_trace_is_not_hidden():
    m = kernels.MARKER_KERNEL
    ev = []
    for i in range(3):  # side-stream work ends before the closing marker starts: joined
        t = i * 100.0
        ev += [_k(m, t, 1, 7), _k("gelu", t + 2, 10, 13), _k(m, t + 13, 1, 7)]
    assert kernels.hidden_work(ev)[1] == []
    # the same work without closing markers (the old system-profile layout) was all flagged
    odd = [e for j, e in enumerate(ev) if not (e["name"] == m and j % 3 == 2)]
    assert kernels.hidden_work(odd)[1]
