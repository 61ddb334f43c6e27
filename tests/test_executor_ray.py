"""The Ray executor on CPU: a local Ray cluster, several harness actors, real g++ candidates.

One ``ray.init`` and one executor serve the whole module (Ray start-up is slow). Every C++
candidate comes from tests/candidates/cpp_multi.py, so they share one content-hashed build.
"""

import time
from pathlib import Path

import pytest

from mining.tasks import load_file
from rewards.executors import ExecutorConfig, make_executor
from rewards.harness import Evaluator

ray = pytest.importorskip("ray")
from rewards.executors.ray_exec import RayExecutor, label  # noqa: E402

CANDS = Path(__file__).parent / "candidates"
ROOT = str(Path(__file__).resolve().parent.parent)
pytestmark = pytest.mark.slow
N_WORKERS = 3


def multi(behaviour: str, init_sleep: float = 0.0) -> str:
    src = (CANDS / "cpp_multi.py").read_text().replace("ext.BEHAVIOUR", "ext." + behaviour)
    if init_sleep:  # a slow ModelNew constructor: the same C++ build, a window to kill its actor
        src = src.replace("        super().__init__()\n",
                          f"        super().__init__()\n        import time; time.sleep({init_sleep})\n", 1)
    return src


@pytest.fixture(scope="module")
def task():
    return load_file(CANDS / "tiny_task.py")


@pytest.fixture(scope="module")
def ex(tmp_path_factory):
    ray.init(num_cpus=N_WORKERS + 2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": ROOT}})
    harness = {"device": "cpu", "cache_dir": str(tmp_path_factory.mktemp("kmcache")),
               "timed_calls": 12, "warmup": 2, "timeouts_s": {"correctness": 60, "timing": 60}}
    try:
        with make_executor({"kind": "ray", "num_gpu_workers": N_WORKERS, "max_retries": 1},
                           harness) as e:
            yield e
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def first(ex, task):
    """The one g++ build of the module (later candidates hit the cache)."""
    return ex.submit(task, multi("legit")).result()


def test_factory_gives_ray_executor_with_one_actor_per_worker(ex):
    assert isinstance(ex, RayExecutor) and ex.device == "cpu"
    assert len(ex.slots) == N_WORKERS
    assert len({ray.get(s.actor.info.remote())["pid"] for s in ex.slots}) == N_WORKERS


def test_candidates_are_evaluated_across_actors(ex, task, first):
    assert first.status == "ok", (first.error, first.log_tail)
    assert first.compiled and not first.cache_hit and first.evidence["executor_retries"] == 0
    kinds = ["legit", "wrong", "nanout", "shape", "alias", "legit"] * 2
    futs = [ex.submit(task, multi(b)) for b in kinds]
    res = [f.result() for f in futs]
    want = {"legit": "ok", "wrong": "incorrect", "nanout": "incorrect", "shape": "incorrect",
            "alias": "incorrect"}
    assert [r.status for r in res] == [want[b] for b in kinds], [r.error for r in res]
    assert all(r.cache_hit for r in res)
    # the same verdicts as the in-process executor gives, spread over more than one actor
    assert len({r.evidence["executor_pid"] for r in res}) >= 2
    assert res[3].evidence["output_aliases_input"] is False and res[4].evidence["output_aliases_input"]


def _kill_when_busy(ex, name: str, times: int, timeout: float = 240) -> int:
    """Kill the actor evaluating ``name`` as soon as it holds it, ``times`` times."""
    killed, seen = 0, set()
    t0 = time.time()
    while killed < times and time.time() - t0 < timeout:
        for idx, cur in ex.busy().items():
            slot = ex.slots[idx]
            if cur == name and (idx, slot.generation) not in seen:
                seen.add((idx, slot.generation))
                time.sleep(0.5)  # inside the evaluation, not before it
                ray.kill(slot.actor, no_restart=True)
                killed += 1
        time.sleep(0.05)
    return killed


def test_killed_actor_is_replaced_and_its_candidate_retried(ex, task, first):
    slow = multi("legit", init_sleep=4)
    before = ex.replaced
    fut = ex.submit(task, slow)
    others = [ex.submit(task, multi(b)) for b in ("legit", "wrong", "legit")]
    assert _kill_when_busy(ex, label(task, slow), 1) == 1
    r = fut.result(timeout=300)
    assert r.status == "ok", (r.error, r.log_tail)
    assert r.evidence["executor_retries"] == 1
    assert ex.replaced == before + 1
    assert [f.result().status for f in others] == ["ok", "incorrect", "ok"]
    # the pool is whole again: every slot answers
    assert len(ray.get([s.actor.info.remote() for s in ex.slots], timeout=120)) == N_WORKERS


def test_candidate_is_crashed_after_its_retry_also_dies(ex, task, first):
    slow = multi("legit", init_sleep=5)
    fut = ex.submit(task, slow)
    assert _kill_when_busy(ex, label(task, slow), 2) == 2
    r = fut.result(timeout=300)
    assert (r.status, r.correct) == ("crashed", False)
    assert r.evidence["executor_retries"] == 2 and "died 2 times" in r.error
    # the run goes on: the next candidate is evaluated by the replacement actors
    assert ex.submit(task, multi("legit")).result().status == "ok"


def test_local_is_the_default_and_needs_no_ray():
    assert isinstance(make_executor(None, {"device": "cpu"}), Evaluator)
    assert isinstance(make_executor({"kind": "local"}, {"device": "cpu"}), Evaluator)


def test_bad_executor_config_is_one_sentence():
    with pytest.raises(ValueError, match="unknown executor config key"):
        ExecutorConfig.from_mapping({"kind": "ray", "gpus": 2})
    with pytest.raises(ValueError, match="executor.kind must be one of local, ray"):
        ExecutorConfig.from_mapping({"kind": "dask"})


def test_missing_ray_is_one_sentence(monkeypatch):
    import sys

    from rewards.executors import ray_exec

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(ImportError, match=r"executor=ray needs Ray, which is not installed"):
        ray_exec.import_ray()

