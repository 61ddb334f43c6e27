"""Cycle wiring and the train command, on a tiny local model and the real store.

The mine/split/score stages are replaced by one that writes skill samples (their own tests
cover them); train is the real trainer. Asserted: round 2's Coder is round 1's adapter,
round 2 trains from it, both checkpoints are registered, and resume restores the step.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omegaconf import open_dict

from agents.tiny_model import build_tiny_model
from mining.config import load_config
from mining.store import Store


def reward(prompts, completions, meta):
    """Share of completion tokens in a fixed fifth of the vocabulary (string-free, verifiable)."""
    return [sum(t % 5 == 0 for t in m["completion_ids"]) / max(1, len(m["completion_ids"]))
            for m in meta]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), hidden=32, layers=1, heads=2, vocab_size=300)


def _overrides(tiny, root):
    return [f"store.root={root}", "model=hf", f"model.path={tiny}", "train.reward=tests.test_cycle:reward",
            "train.steps=3", "train.group_size=4", "train.prompts_per_step=2", "train.grad_accum=2",
            "train.max_completion_length=6", "train.lr=1e-2", "train.device=cpu",
            "train.log.tensorboard=false", "train.kl_coef=0.05"]


def _write_samples(cfg):
    rows = [{"sample_id": f"{cfg.run_id}-{i}", "skill": 1, "task_id": "l3_01", "run_id": cfg.run_id,
             "round": int(cfg.round),
             "messages_json": json.dumps([{"role": "user", "content": f"task {i} round {cfg.round}"}])}
            for i in range(3)]
    Store(cfg.store.root).write("samples", rows)


def test_cycle_round2_uses_round1_checkpoint(tiny, tmp_path):
    from mining.cycle import default_stages, run_cycle

    cfg = load_config(_overrides(tiny, tmp_path))
    seen = []
    stages = {"mine": lambda c: seen.append(dict(c.agents.roles.coder)), "split": _write_samples,
              "score": lambda c: None, "train": default_stages()["train"]}
    recs = run_cycle(cfg, 2, stages=stages, cycle_id="cyc")
    a1 = recs[0]["train"]["adapter"]
    assert recs[0]["coder_adapter"] is None and seen[0].get("adapter") is None
    assert seen[1]["adapter"] == a1 and recs[1]["coder_adapter"] == a1
    assert (Path(a1) / "adapter_config.json").exists()
    ck = Store(tmp_path).read("checkpoints").to_pylist()
    assert sorted(r["round"] for r in ck) == [0, 1]
    meta2 = json.loads([r for r in ck if r["round"] == 1][0]["metadata_json"])
    assert meta2["config"]["adapter"] == a1            # round 2 continued from round 1
    assert meta2["config"]["samples_run_id"] == "cyc-r1"
    log = (tmp_path / "train" / "cyc-r1.jsonl").read_text().splitlines()
    assert len(log) == 3 and json.loads(log[0])["kl"] >= 0.0


def test_train_command_and_resume(tiny, tmp_path, capsys):
    from mining.cli import main

    cfg = load_config(_overrides(tiny, tmp_path))
    with open_dict(cfg):
        cfg.run_id, cfg.round = "one", 0
    _write_samples(cfg)
    assert main(["train", *_overrides(tiny, tmp_path), "run_id=one"]) == 0
    out = capsys.readouterr().out
    assert "train: 3 steps" in out
    ck = Store(tmp_path).read("checkpoints").to_pylist()
    assert len(ck) == 1 and ck[0]["step"] == 3
    cid = ck[0]["checkpoint_id"]
    assert main(["train", *_overrides(tiny, tmp_path), "run_id=two", f"train.resume={cid}",
                 "train.steps=5"]) == 0
    steps = sorted(r["step"] for r in Store(tmp_path).read("checkpoints").to_pylist())
    assert steps == [3, 5]                      # resumed at step 3, ran 2 more


def test_train_without_samples_is_one_sentence(tiny, tmp_path, capsys):
    from mining.cli import main

    assert main(["train", *_overrides(tiny, tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no skill samples to train on" in err and len(err.strip().splitlines()) == 1
