"""The build queue's order (harness.build_order, rewards/harness/buildorder.py): a batch's heavy
builds start first, so that none of them starts in the last wave and sets the batch's end."""

import doctest
import threading
import time

import pytest

from bench import throughput_candidates as tc
from mining.tasks import load_suite
from rewards.harness import buildorder
from rewards.harness.config import HarnessConfig


def test_doctests():
    assert doctest.testmod(buildorder).failed == 0


@pytest.fixture(scope="module")
def tasks():
    return load_suite("level3", import_check=False).tasks[:4]


def test_real_style_sources_are_classed_by_what_nvcc_will_compile(tasks):
    """The throughput bench's candidates (written like real Level 3 solutions): the templated
    AT_DISPATCH variant keeps torch in nvcc (38-59 s builds on the H100), the float-only ones split."""
    seen = {}
    for v in range(tc.TEMPLATED_EVERY):
        c = tc.make_source(tasks[v % len(tasks)], v, "order")
        templated = v % tc.TEMPLATED_EVERY == tc.TEMPLATED_EVERY - 1
        seen[v] = buildorder.build_class(c.source)
        assert seen[v] == ("heavy" if templated else "light"), (v, c.style)
        assert buildorder.build_class(c.source, split_launchers=False) == "heavy"  # no split: torch in nvcc
    assert set(seen.values()) == {"heavy", "light"}


def test_cpu_and_pure_python_programs():
    cpu = tc.make_source(load_suite("level3", import_check=False).tasks[0], 0, "order", device="cpu")
    assert buildorder.build_class(cpu.source) == "light"  # C++ only: no CUDA literal, still a build
    assert buildorder.build_class("import torch\nclass ModelNew(torch.nn.Module):\n    pass\n") == "none"


def _run(pool_ordered: bool, jobs: list[tuple[int, str]]) -> list[str]:
    """One worker, held busy while ``jobs`` are queued; returns the order they ran in."""
    pool = buildorder.PriorityPool(1, "test", ordered=pool_ordered)
    gate, ran = threading.Event(), []
    pool.submit(0, gate.wait)
    for rank, name in jobs:
        pool.submit(rank, ran.append, name)
    time.sleep(0.05)
    gate.set()
    pool.shutdown(wait=True)
    return ran


def test_pool_takes_the_lowest_rank_first_and_submission_order_within_a_rank():
    jobs = [(2, "light-a"), (1, "heavy-a"), (2, "light-b"), (0, "none"), (1, "heavy-b")]
    assert _run(True, jobs) == ["none", "heavy-a", "heavy-b", "light-a", "light-b"]
    assert _run(False, jobs) == [n for _, n in jobs]  # build_order: fifo


def test_pool_shutdown_with_cancel_drops_jobs_not_started():
    pool = buildorder.PriorityPool(1, "test")
    gate, ran = threading.Event(), []
    pool.submit(0, gate.wait)
    pool.submit(1, ran.append, "late")
    pool.shutdown(wait=False, cancel_futures=True)
    gate.set()
    pool.shutdown(wait=True)
    assert ran == []


def test_build_order_setting_is_checked():
    assert HarnessConfig().build_order == "heavy_first"
    assert HarnessConfig.from_mapping({"build_order": "fifo"}).build_order == "fifo"
    with pytest.raises(ValueError, match="build_order"):
        HarnessConfig.from_mapping({"build_order": "longest"})
