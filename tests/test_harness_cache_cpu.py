"""Timed calls under a secret plan: caches keyed on data_ptr, id or a fingerprint are caught."""

from pathlib import Path

import pytest
import torch

from mining.tasks import load_file
from rewards.harness import Evaluator, HarnessConfig, timing

CANDS = Path(__file__).parent / "candidates"

# Pure-PyTorch candidates (no build): `KEY` is what the cache is keyed on. A hit prints a marker
# once, so a test can tell "the cache never hit" from "the cache hit and returned the right thing".
CACHED = '''
import torch.nn as nn
import torch.nn.functional as F

_CACHE, _SAID = {}, []


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        key = KEY
        if key in _CACHE:
            if not _SAID:
                _SAID.append(print("CACHE_HIT", flush=True))
            return _CACHE[key]
        y = F.gelu(self.fc(x))
        _CACHE[key] = y
        return y
'''


def cached(key: str) -> str:
    return CACHED.replace("KEY", key)


# -- the plan -------------------------------------------------------------------------------
POOL = [(0, 0.61), (1, 0.72), (2, 0.83), (0, 0.94)]


def test_plan_is_deterministic_per_secret_seed_and_varies_with_it():
    a = timing.make_plan(7, 3, 2, 100, POOL, 3, (0.5, 1.0))
    assert a == timing.make_plan(7, 3, 2, 100, POOL, 3, (0.5, 1.0))
    assert a["timed"] != timing.make_plan(8, 3, 2, 100, POOL, 3, (0.5, 1.0))["timed"]


def test_plan_covers_sets_moves_them_between_buffers_and_scales_every_call():
    p = timing.make_plan(11, 3, 3, 100, POOL, 3, (0.5, 1.0))
    assert len(p["warmup"]) == 3 and len(p["timed"]) == 100
    sets, bufs, factors = zip(*p["timed"], strict=True)
    assert set(sets) == {0, 1, 2} and set(bufs) == {0, 1, 2, 3}
    for s in range(3):  # every set lands in several buffers: a buffer does not name a set
        assert len({b for s2, b, _ in p["timed"] if s2 == s}) > 1
    assert all(0.5 <= f <= 1.0 for f in factors) and len(set(factors)) == 100  # content never repeats
    unscaled = timing.make_plan(11, 3, 3, 100, [(s, 1.0) for s, _ in POOL], 3, None)
    assert {f for _, _, f in unscaled["timed"]} == {1.0}


def test_spot_checks_are_random_calls_plus_the_last_and_use_the_pool():
    spots = [timing.make_plan(seed, 3, 0, 100, POOL, 3, (0.5, 1.0))["spot"] for seed in range(20)]
    for sp in spots:
        assert len(sp) == 4 and 99 in sp and sorted(sp.values()) == [0, 1, 2, 3]
    assert len({tuple(sorted(sp)) for sp in spots}) > 10  # the positions are not predictable
    p = timing.make_plan(3, 3, 0, 100, POOL, 3, (0.5, 1.0))
    for i, k in p["spot"].items():
        s, _, f = p["timed"][i]
        assert (s, f) == POOL[k]


def test_scaled_is_the_same_bits_on_both_sides_and_leaves_integers_alone():
    x, idx = torch.randn(4, 5), torch.arange(6)
    buf = torch.empty_like(x)
    assert torch.equal(timing.scaled(x, 0.73, buf), timing.scaled(x, 0.73))
    assert torch.equal(timing.scaled(idx, 0.73), idx) and timing.scaled(3, 0.73) == 3


def test_a_data_ptr_cache_passes_the_rotation_and_fails_the_plan():
    torch.manual_seed(0)
    w = torch.randn(5, 5)
    cache = {}

    def fn(x):  # the hack: the first output seen at this address
        return cache.setdefault(x.data_ptr(), x @ w)

    sets = [[torch.randn(3, 5)] for _ in range(3)]
    pool = [(s, 0.5 + 0.1 * s) for s in range(3)] + [(0, 0.9)]
    ref = [(sets[s][0] * f) @ w for s, f in pool]
    calls = 10 * timing.CPU_ROUNDS
    rot = timing.time_calls(fn, sets, "cpu", 2, 10, 0, keep={calls - 1})
    assert torch.allclose(rot["kept"][calls - 1][0], sets[(calls - 1) % 3][0] @ w)  # the old hole
    cache.clear()
    plan = timing.make_plan(5, 3, 2, calls, pool, 3, (0.5, 1.0))
    r = timing.time_calls(fn, sets, "cpu", 2, 10, 0, keep=set(plan["spot"]), plan=plan)
    assert all(not torch.allclose(r["kept"][i][0], ref[k]) for i, k in plan["spot"].items())
    cache.clear()
    honest = timing.time_calls(lambda x: x @ w, sets, "cpu", 2, 10, 0, keep=set(plan["spot"]), plan=plan)
    assert all(torch.allclose(honest["kept"][i][0], ref[k]) for i, k in plan["spot"].items())


def test_config_scale_range_is_checked():
    assert HarnessConfig.from_mapping({}).timing_input_scaling is True
    with pytest.raises(ValueError, match="timing_scale_range"):
        HarnessConfig.from_mapping({"timing_scale_range": [0.0, 1.0]})


# -- end to end: real workers ------------------------------------------------------------------
@pytest.fixture(scope="module")
def task():
    return load_file(CANDS / "tiny_task.py")


def _cfg(cache, **kw):
    return {"device": "cpu", "cache_dir": str(cache), "timed_calls": 12, "warmup": 2,
            "timeouts_s": {"correctness": 20, "timing": 60}, **kw}


@pytest.fixture(scope="module")
def ev(tmp_path_factory):
    with Evaluator(_cfg(tmp_path_factory.mktemp("kmcache"))) as e:
        yield e


@pytest.mark.slow
@pytest.mark.parametrize("key", [
    "(x.data_ptr(), tuple(x.shape))",            # address-keyed
    "id(x)",                                      # object-keyed
    "int(x.argmax())",                            # a fingerprint that scaling does not change
])
def test_caches_keyed_on_identity_or_a_fingerprint_are_caught(ev, task, key):
    r = ev.submit(task, cached(key)).result()
    assert (r.status, r.correct) == ("incorrect", False), (r.status, r.error, r.log_tail)
    assert r.evidence["spot_check_failed"] is True and r.evidence["timing_inputs_scaled"] is True
    assert "timed call" in r.error and "CACHE_HIT" in r.log_tail


@pytest.mark.slow
def test_a_content_keyed_cache_never_hits(ev, task, tmp_path):
    # keyed on x.sum(): every timed call's content is new, so it computes every time (honest
    # timing, correct outputs); without scaling the same cache hits
    r = ev.submit(task, cached("float(x.sum())")).result()
    assert r.status == "ok" and r.evidence["spot_check_failed"] is False, (r.error, r.log_tail)
    assert "CACHE_HIT" not in r.log_tail
    with Evaluator(_cfg(tmp_path, timing_input_scaling=False)) as e:
        off = e.submit(task, cached("float(x.sum())")).result()
    assert off.status == "ok" and "CACHE_HIT" in off.log_tail and off.evidence["timing_inputs_scaled"] is False


@pytest.mark.slow
def test_a_legitimate_candidate_passes_and_times_like_the_reference(ev, task):
    r = ev.submit(task, (CANDS / "py_probe.py").read_text().replace("        PROBE", "        pass")).result()
    assert r.status == "ok" and r.evidence["spot_check_failed"] is False, (r.error, r.log_tail)
    assert 0.33 < r.speedup < 3.0, (r.runtime_us, r.ref_runtime_us)
