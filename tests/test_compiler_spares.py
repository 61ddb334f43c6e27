"""harness.compiler_spares (rewards/harness/compilerspares.py): a candidate whose program calls
torch.compile loads in a worker that imported dynamo and inductor after its hello, started when
the candidate's build started; an idle one is never stopped, a taken one is stopped like any."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mining.tasks import load_file
from rewards.harness import Evaluator, compilerspares

CANDS = Path(__file__).parent / "candidates"

PLAIN = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.act = nn.GELU()

    def forward(self, x):
        return self.act(self.fc(x))
'''
# what real programs write (pango0 zeroshot: self.forward = torch.compile(self.forward)); eager: no codegen on CI
COMPILED = PLAIN.replace("self.act = nn.GELU()", 'self.act = torch.compile(nn.GELU(), backend="eager")')


class FakeSlot:
    def __init__(self):
        self.kept: list[int] = []
        self.pool: list[str] = []

    def keep_spares(self, pool, n, compiler=False):
        assert pool == compilerspares.POOL and compiler
        self.kept.append(n)
        self.pool = self.pool[:n] + [f"w{i}" for i in range(len(self.pool), n)]

    def take_spare(self, pool):
        return self.pool.pop(0) if self.pool else None


def test_spares_follow_the_candidates_that_want_one_within_the_resident_places():
    slots = [FakeSlot(), FakeSlot()]
    cs = compilerspares.CompilerSpares(slots, per_slot=2, enabled=True)
    keys = [object() for _ in range(5)]
    assert not cs.want(object(), PLAIN)  # no torch.compile: no spare
    assert [s.kept for s in slots] == [[], []]
    for k in keys:
        assert cs.want(k, COMPILED)
    assert [s.kept[-1] for s in slots] == [2, 2]  # 5 wanted, split over 2 slots, 2 places each
    assert cs.take(slots[0], keys[0]) == "w0" and not cs.wants(keys[0])
    assert cs.take(slots[0], object()) is None  # one that never wanted one takes none
    for k in keys[1:4]:
        cs.release(k)  # built wrong or finished: wanted no more
    assert [s.kept[-1] for s in slots] == [1, 1] and len(slots[1].pool) == 1
    cs.release(keys[4])
    cs.release(keys[4])  # twice (an OOM retry, then the end): counted once
    assert [s.kept[-1] for s in slots] == [0, 0] and slots[1].pool == []


def test_off_or_unparsable_programs_want_none():
    slot = FakeSlot()
    assert not compilerspares.CompilerSpares([slot], 2, enabled=False).want(object(), COMPILED)
    assert not compilerspares.CompilerSpares([slot], 2, enabled=True).want(object(), "def f(:\n torch.compile(f)")
    assert slot.kept == []


@pytest.fixture(scope="module")
def task():
    return load_file(CANDS / "tiny_task.py")


def _cfg(tmp_path, **kw) -> dict:
    return {"device": "cpu", "cache_dir": str(tmp_path), "timed_calls": 8, "warmup": 1,
            "timeouts_s": {"correctness": 120, "timing": 60}, **kw}


@pytest.mark.slow
def test_a_compiling_candidate_loads_in_a_worker_that_imported_the_compiler(tmp_path, task):
    with Evaluator(_cfg(tmp_path)) as ev:
        comp, plain = ev.submit(task, COMPILED), ev.submit(task, PLAIN)
        rc, rp = comp.result(timeout=600), plain.result(timeout=600)
        left = [len(s.spares[compilerspares.POOL]) for s in ev._all_slots]
    assert rc.status == "ok" and rp.status == "ok", (rc.error, rp.error)
    assert rc.evidence["compiler_spare"] is True
    imp = rc.evidence["compiler_import"]
    assert "error" not in imp and imp["cpu_s"] > 0.2, imp  # dynamo + inductor: ~1400 modules
    assert "compiler_spare" not in rp.evidence and "compiler_import" not in rp.evidence
    assert left == [0]  # nobody wants one any more: none kept
    with Evaluator(_cfg(tmp_path, compiler_spares=False)) as ev:
        off = ev.submit(task, COMPILED).result(timeout=600)
    assert off.status == "ok" and "compiler_spare" not in off.evidence


@pytest.mark.slow
def test_an_idle_compiler_spare_is_left_running_and_a_starting_one_is_stopped(tmp_path):
    """Slot.quiet (a timed section) stops every worker but idle spares: a compiler spare that has
    said hello imports beside the timing (it has run no candidate code); one still starting is
    stopped like any warming spare."""
    with Evaluator(_cfg(tmp_path)) as ev:
        slot, key = ev._all_slots[0], object()
        assert ev._compilers.want(key, COMPILED)
        (w,) = slot.spares[compilerspares.POOL]
        with slot.exclusive({}, "test", "t") as stopped:  # at once: it is still importing torch
            assert w in stopped
        assert w.conn.poll(120)  # its hello
        time.sleep(0.2)
        with slot.exclusive({}, "test", "t") as stopped:
            assert w not in stopped and w.alive()
        ev._compilers.release(key)
        assert not slot.spares[compilerspares.POOL] and not w.alive()
