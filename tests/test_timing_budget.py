"""harness.timing_budget_ms: a task's timed calls come from its reference's forward time, the same
for the reference and every candidate, and a cached baseline is keyed by that count."""

from pathlib import Path

import pytest

from mining.tasks import load_file
from rewards.harness import Evaluator, HarnessConfig

CANDS = Path(__file__).parent / "candidates"


def probe(code: str) -> str:
    return (CANDS / "py_probe.py").read_text().replace("        PROBE", "        " + code)


@pytest.mark.parametrize("forward_us,expected", [
    (16_000.0, 20),   # 300 ms / 16 ms = 18.75 -> 20 (a ten), the floor min_timed_calls
    (9_000.0, 40),    # 33.3 -> 40
    (5_000.0, 60),    # 60 exactly
    (1_000.0, 100),   # 300 -> capped at timed_calls
    (120_000.0, 20),  # 2.5 -> 10 -> raised to min_timed_calls
    (None, 100), (0.0, 100),  # no estimate: the fixed protocol
])
def test_calls_for_fills_the_budget_in_tens_within_the_bounds(forward_us, expected):
    assert HarnessConfig.from_mapping({"timing_budget_ms": 300}).calls_for(forward_us) == expected


def test_calls_for_without_a_budget_or_with_few_calls():
    assert HarnessConfig().calls_for(16_000.0) == 20  # the default budget, 300 ms: 18.75 -> 20
    assert HarnessConfig.from_mapping({"timing_budget_ms": 0}).calls_for(16_000.0) == 100
    c = HarnessConfig.from_mapping({"timed_calls": 12, "min_timed_calls": 20, "timing_budget_ms": 300})
    assert c.calls_for(16_000.0) == 12  # never more than timed_calls, even below the floor
    assert c.calls_for(1.0) == 12


@pytest.mark.parametrize("bad", [{"timing_budget_ms": -1}, {"timing_budget_ms": "300"},
                                 {"min_timed_calls": 0}, {"timed_calls": 2.5}])
def test_bad_budget_settings_fail_in_one_sentence(bad):
    with pytest.raises(ValueError, match="timing_budget_ms|timed_calls"):
        HarnessConfig.from_mapping(bad)


def _cfg(cache, budget_ms):
    return {"device": "cpu", "cache_dir": str(cache), "timed_calls": 24, "min_timed_calls": 5, "warmup": 1,
            "timing_budget_ms": budget_ms, "timeouts_s": {"correctness": 30, "timing": 60}}


def test_the_reference_sets_the_count_and_a_slow_candidate_cannot_change_it(tmp_path):
    task = load_file(CANDS / "tiny_task.py")
    with Evaluator(_cfg(tmp_path, 1e-6)) as ev:  # a budget below one forward: the fewest calls (one ten)
        fast = ev.submit(task, probe("pass")).result()
        slow = ev.submit(task, probe("import time; time.sleep(0.003)")).result()
    for r in (fast, slow):
        assert r.status == "ok", (r.error, r.log_tail)
        assert r.evidence["timed_calls"] == 10 and r.evidence["ref_forward_us"] > 0
    assert slow.runtime_us > fast.runtime_us + 2000  # timed as it runs; its count is the reference's
    # the fixed protocol on the same cache: a baseline of 10 calls is not taken for one of 24
    with Evaluator(_cfg(tmp_path, 0)) as ev:
        fixed = ev.submit(task, probe("pass")).result()
        timings = list(ev.task_timings)
    assert fixed.status == "ok" and fixed.evidence["timed_calls"] == 24
    assert timings[0]["baseline_s"] > 0  # measured again, not loaded
    with Evaluator(_cfg(tmp_path, 1e-6)) as ev:  # the budget again: its 10-call record is found
        again = ev.submit(task, probe("pass")).result()
        timings = list(ev.task_timings)
    assert again.status == "ok" and again.evidence["timed_calls"] == 10
    assert timings[0]["baseline_s"] == 0.0 and again.ref_runtime_us == fast.ref_runtime_us
