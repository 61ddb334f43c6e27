"""`run`, `split`, `score`, `train` and `cycle` work where duckdb and polars are absent (the GPU
machine: DESIGN.md says to import them lazily, inside the commands that need them).

Every CLI call here runs in a subprocess whose PYTHONPATH starts with tests/gpu_node, whose
sitecustomize makes `import duckdb` / `import polars` fail, as on the GPU machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agents.tiny_model import build_tiny_model
from mining.store import Store

ROOT = Path(__file__).resolve().parent.parent
BLOCKER = ROOT / "tests" / "gpu_node"
PACKAGES = ("mining", "skills", "train", "agents", "rewards")


def env() -> dict:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(BLOCKER), str(ROOT), *filter(None, [e.get("PYTHONPATH")])])
    return e


def cli(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "mining", *args], cwd=ROOT, env=env(),
                       capture_output=True, text=True, timeout=timeout)
    assert "absent on the GPU machine" not in p.stderr + p.stdout, p.stderr[-3000:]
    return p


def test_the_blocker_blocks():
    p = subprocess.run([sys.executable, "-c", "import duckdb"], env=env(), capture_output=True, text=True)
    assert p.returncode != 0 and "absent on the GPU machine" in p.stderr


def test_every_module_imports_without_duckdb_and_polars():
    mods = sorted(".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
                  for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py") if p.stem != "__main__")
    code = ("import importlib, sys\nbad = []\nfor m in sys.argv[1:]:\n    try:\n"
            "        importlib.import_module(m)\n    except ModuleNotFoundError as e:\n"
            "        if e.name.partition('.')[0] in ('duckdb', 'polars'): bad.append(m)\n"
            "print(bad)\nsys.exit(1 if bad else 0)\n")
    p = subprocess.run([sys.executable, "-c", code, *mods], cwd=ROOT, env=env(),
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"import duckdb/polars at module level: {p.stdout} {p.stderr[-2000:]}"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), hidden=32, layers=1, heads=2, vocab_size=300)


def test_run_split_score_train_cycle_without_duckdb_and_polars(tmp_path, tiny):
    from test_run_resume import replay_file

    replay_file(tmp_path)
    h = ["harness.device=cpu", f"harness.cache_dir={tmp_path / 'cache'}", "harness.timed_calls=3",
         "harness.warmup=1", "harness.trials=1", "harness.compile_baseline=false"]
    root = f"store.root={tmp_path / 'data'}"
    p = cli("run", "+task=level3", "task.ids=[l3_01_mlp]", "model=replay",
            f"model.path={tmp_path / 'replay.jsonl'}", root, *h, "agents.target_speedup=0.0",
            "run_id=gpu-node")
    assert p.returncode == 0, p.stderr[-3000:]
    p = cli("split", root)
    assert p.returncode == 0 and "new samples" in p.stdout, p.stderr[-3000:]
    p = cli("score", root, *h)
    assert p.returncode == 0, p.stderr[-3000:]
    n_samples = len(Store(tmp_path / "data").read("samples"))
    assert n_samples >= 2 and len(Store(tmp_path / "data").read("scores")) == n_samples
    train = ["model=hf", f"model.path={tiny}", "model.sampling.max_tokens=8", "train.steps=1",
             "train.group_size=2", "train.prompts_per_step=1", "train.grad_accum=1",
             "train.max_completion_length=8", "train.device=cpu", "train.log.tensorboard=false",
             "train.max_prompts=1"]
    p = cli("train", root, *h, *train, "run_id=gpu-node-train")
    assert p.returncode == 0 and "checkpoint" in p.stdout, p.stderr[-3000:]
    p = cli("cycle", f"store.root={tmp_path / 'cyc'}", *h, *train, "+task=level3",
            "task.ids=[l3_01_mlp]", "+rounds=1", "run_id=gpu-node-cycle", "agents.max_turns=1",
            "train.prompts_from_tasks=true")
    assert p.returncode == 0, p.stderr[-3000:]
    assert len(Store(tmp_path / "cyc").read("checkpoints")) == 1
