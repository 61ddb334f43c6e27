"""Sharded runs: ``shard=i num_shards=n`` split the tasks by content hash; shards share one store.

The runs use the real CLI, store and agents with a replayed model whose Coder never answers
with code, so no candidate is built: what is under test is the split and the writes.
"""

import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from mining.cli import main as cli
from mining.scale import select, select_tasks, shard_of
from mining.store import Store
from mining.tasks import load_tasks

ROOT = Path(__file__).resolve().parent.parent
PLAN = ('```json\\n{\\"subtasks\\": [{\\"title\\": \\"whole model\\", \\"ops\\": [\\"Linear\\"], '
        '\\"description\\": \\"implement the model\\"}], \\"fusion_boundaries\\": [], '
        '\\"layout_contracts\\": [], \\"host_concerns\\": []}\\n```')


@pytest.fixture(scope="module")
def tasks():
    return load_tasks(OmegaConf.create({"kind": "suite", "suite": "level3"})).tasks


@pytest.fixture
def replay(tmp_path):
    p = tmp_path / "noreply.jsonl"
    p.write_text(f'{{"role": "planner", "response": "{PLAN}"}}\n'
                 '{"role": "coder", "response": "I would rather not write code today."}\n')
    return p


def run_args(tmp: Path, replay: Path, *extra: str) -> list[str]:
    return ["run", "+task=level3", "model=replay", f"model.path={replay}", "harness.device=cpu",
            f"store.root={tmp / 'data'}", f"harness.cache_dir={tmp / 'cache'}",
            "agents.samples_per_task=2", "run_id=sharded", *extra]


def test_shards_partition_the_tasks_stably(tasks):
    assert len(tasks) == 12
    for n in (2, 3, 5):
        parts = [select_tasks(tasks, OmegaConf.create({"shard": i, "num_shards": n})) for i in range(n)]
        ids = [t.id for p in parts for t in p]
        assert sorted(ids) == sorted(t.id for t in tasks)  # the union, nothing twice
    # a pure function of the key (sha256): the same on every machine and Python version
    assert [shard_of(k, 4) for k in ("a", "b", "c", "d")] == [2, 2, 2, 1]  # checked with sha256sum
    assert select(list(range(9)), str, OmegaConf.create({"shard": 0, "num_shards": 1})) == list(range(9))


def test_two_concurrent_shards_fill_one_store_without_duplicates(tmp_path, replay, tasks):
    procs = [subprocess.Popen([sys.executable, "-m", "mining",
                               *run_args(tmp_path, replay, f"shard={i}", "num_shards=2")],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(2)]
    for p in procs:
        out = p.communicate(timeout=600)[0]
        assert p.returncode == 0, out[-3000:]
    store = Store(tmp_path / "data")
    want = sorted(f"sharded:{t.id}:s{s}" for t in tasks for s in range(2))
    raw = store.read("trajectories", dedupe=False).column("trajectory_id").to_pylist()
    assert sorted(raw) == want                      # every task once per sample, across shards
    turns = store.read("turns", dedupe=False).column("turn_id").to_pylist()
    assert len(turns) == len(set(turns)) > 0
    assert store.read("runs", dedupe=False).column("run_id").to_pylist() == ["sharded"]

    # re-running a shard resumes it: nothing new, nothing duplicated
    assert cli(run_args(tmp_path, replay, "shard=1", "num_shards=2")) == 0
    assert sorted(store.read("trajectories", dedupe=False).column("trajectory_id").to_pylist()) == want


def test_multirun_sweeps_the_shards(tmp_path, replay, tasks):
    r = subprocess.run([sys.executable, "-m", "mining", *run_args(tmp_path, replay, "-m",
                        "shard=0,1,2", "num_shards=3", "agents.samples_per_task=1")],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    store = Store(tmp_path / "data")
    got = store.read("trajectories", dedupe=False).column("trajectory_id").to_pylist()
    assert sorted(got) == sorted(f"sharded:{t.id}:s0" for t in tasks)
    assert len(list((tmp_path / "data" / "hydra").glob("*/[012]"))) == 3  # one folder per job


@pytest.mark.parametrize("extra,msg", [
    (["shard=0", "num_shards=2", "run_id=null"], "needs run_id=<name> shared by all its shards"),
    (["shard=2", "num_shards=2"], "need num_shards >= 1 and 0 <= shard < num_shards"),
])
def test_bad_shard_settings_are_one_sentence(tmp_path, replay, capsys, extra, msg):
    assert cli(run_args(tmp_path, replay, *extra)) == 2
    assert msg in capsys.readouterr().err


@pytest.mark.slow
def test_score_shards_score_each_sample_once(tmp_path):
    from test_store_score import store_to_score

    st, common = store_to_score(tmp_path)
    assert cli(["split", *common]) == 0
    samples = st.read("samples").column("sample_id").to_pylist()
    assert len(samples) == 2
    scored = []
    for shard in (0, 1):
        assert cli(["score", *common, f"shard={shard}", "num_shards=2"]) == 0
        now = st.read("scores", dedupe=False).column("sample_id").to_pylist()
        assert sorted(set(now) - set(scored)) == sorted(s for s in samples if shard_of(s, 2) == shard)
        scored = now
    assert sorted(scored) == sorted(samples)  # the union, each sample once
