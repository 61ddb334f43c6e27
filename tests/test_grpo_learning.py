"""The trainer learns: a tiny local model raises its mean reward on a verifiable task.

Task: reward = share of completion tokens drawn from a fixed target set (a fifth of the
vocabulary). A random policy scores about 0.2; GRPO with LoRA must lift it clearly (by more than 0.12 absolute, ~7 sigma of the 5-step mean).
"""

from __future__ import annotations

import json
import time

import pytest

from agents.tiny_model import build_tiny_model
from train.config import TrainConfig
from train.grpo import GRPOTrainer


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), hidden=32, layers=1, heads=2, vocab_size=300)


def target_reward(prompts, completions, meta):
    out = []
    for m in meta:
        ids = m["completion_ids"]
        out.append(sum(1 for t in ids if t % 5 == 0) / len(ids) if ids else float("nan"))
    return out


PROMPTS = [[{"role": "user", "content": f"write kernel {i}"}] for i in range(4)]


def _cfg(**kw):
    base = dict(group_size=8, prompts_per_step=2, steps=30, grad_accum=2, lr=5e-2,
                max_completion_length=8, kl_coef=0.0, epsilon_high=0.28, device="cpu",
                lora={"r": 8, "alpha": 16, "dropout": 0.0,
                      "target_modules": ["q_proj", "v_proj", "o_proj", "up_proj", "down_proj"]},
                log={"tensorboard": False})
    base.update(kw)
    return TrainConfig.from_mapping(base)


def test_grpo_raises_mean_reward(tiny, tmp_path):
    t0 = time.time()
    tr = GRPOTrainer(_cfg(), str(tiny), target_reward, PROMPTS, store_root=tmp_path, run_id="learn")
    res = tr.train()
    rewards = [h["reward_mean"] for h in res.history]
    first, last = sum(rewards[:5]) / 5, sum(rewards[-5:]) / 5
    print(f"reward {first:.3f} -> {last:.3f} in {time.time() - t0:.1f}s")
    assert first < 0.4
    assert last > first + 0.12, (first, last)
    # the log has one JSONL line per step with the documented keys
    lines = [json.loads(x) for x in res.log_path.read_text().splitlines()]
    assert len(lines) == 30
    for key in ("reward_mean", "reward_std", "adv_std", "kl", "clip_frac", "entropy",
                "tokens_per_s", "eval_share", "gen_s", "update_s"):
        assert key in lines[-1]
