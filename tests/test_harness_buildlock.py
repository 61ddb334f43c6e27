"""A build killed mid-way leaves torch's ``lock`` file in its build folder; the next build of
the same source must not wait on it (it used to stall until the 600 s build timeout)."""

import inspect
import os

import pytest
import torch.utils.cpp_extension as ce

from rewards.harness import buildcache

pytestmark = pytest.mark.slow

CPP = "int add_one(int x) { return x + 1; }"


@pytest.mark.timeout(400)
def test_stale_torch_lock_does_not_stall_the_next_build(tmp_path):
    bound = inspect.signature(ce.load_inline).bind("km_lock_probe", [CPP], functions=["add_one"])
    bound.apply_defaults()
    args = dict(bound.arguments)
    bdir = tmp_path / buildcache.build_key(args)
    bdir.mkdir(parents=True)
    (bdir / "lock").write_text("")  # what a killed build leaves behind
    mod = buildcache._load(args, str(tmp_path))
    assert mod.add_one(41) == 42
    assert not (bdir / "lock").exists() and (bdir / buildcache.MARKER).exists()
    again = buildcache._load(args, str(tmp_path))  # the marker: a cache hit, no compiler
    assert again.add_one(1) == 2 and buildcache.RECORDS[-1]["cache_hit"]
    assert os.path.exists(bdir / ".km_build_lock")
