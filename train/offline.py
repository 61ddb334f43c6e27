"""Offline mode: reward-weighted likelihood over stored (prompt, response, reward) triples.

loss = -mean_i( w_i * mean_t log p(y_it | x_i, y_<t) ),  w_i = (r_i - mean r) / (std r + eps)
over the batch (advantage-weighted regression without the exponential). No generation, no
harness: the rewards are the stored scores. The online mode is the default, as in the method.
"""

from __future__ import annotations

import json
import random

import torch

from train.advantages import group_advantages
from train.loss import completion_logps


def pairs_from_store(samples: list[dict], scores: list[dict]) -> list[tuple[list, str, float]]:
    """(messages, response, reward) for every sample with a response and a non-null reward."""
    reward = {}
    for s in sorted(scores, key=lambda s: str(s.get("scored_at"))):
        if s.get("reward") is not None:
            reward[s["sample_id"]] = float(s["reward"])       # the latest score wins
    return [(json.loads(s["messages_json"]), s["response"], reward[s["sample_id"]])
            for s in samples if s["sample_id"] in reward and s.get("response") and s.get("messages_json")]


def offline_step(model, tok, batch: list[tuple[list, str, float]], device, max_len: int,
                 autocast) -> tuple[torch.Tensor, dict]:
    from train.rollout import render

    tok.padding_side = "left"
    p = tok([render(tok, m) for m, _, _ in batch], return_tensors="pt", padding=True,
            add_special_tokens=False)
    tok.padding_side = "right"
    c = tok([r + (tok.eos_token or "") for _, r, _ in batch], return_tensors="pt", padding=True,
            truncation=True, max_length=max_len, add_special_tokens=False)
    tok.padding_side = "left"
    ids = torch.cat([p["input_ids"], c["input_ids"]], 1).to(device)
    am = torch.cat([p["attention_mask"], c["attention_mask"]], 1).to(device)
    with autocast():
        logps, _ = completion_logps(model, ids, am, c["input_ids"].size(1))
    mask = c["attention_mask"].to(device).float()
    w = group_advantages([r for _, _, r in batch], len(batch), scale="group").to(device)
    seq = (logps * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
    loss = -(w * seq).mean()
    rewards = torch.tensor([r for _, _, r in batch])
    return loss, {"loss": float(loss.detach()), "reward_mean": float(rewards.mean()),
                  "reward_std": float(rewards.std()) if len(batch) > 1 else 0.0,
                  "adv_std": float(w.std()) if len(batch) > 1 else 0.0}


def train_offline(trainer, pairs: list[tuple[list, str, float]]):
    """Run ``trainer.cfg.steps`` reward-weighted steps with a GRPOTrainer's model/optimizer/log."""
    from train.grpo import TrainResult
    from train.logging import StepLog

    cfg = trainer.cfg
    if len(pairs) < 2:
        raise ValueError("offline mode needs at least 2 scored samples with responses")
    bs = min(len(pairs), cfg.prompts_per_step * cfg.group_size)
    history = []
    with StepLog(trainer.store_root, trainer.run_id, bool(cfg.log.get("tensorboard", True))) as log:
        while trainer.step < (cfg.steps or 1):
            batch = random.sample(pairs, bs)
            trainer.model.train()
            loss, m = offline_step(trainer.model, trainer.tok, batch, trainer.device,
                                   cfg.max_completion_length, trainer.autocast)
            loss.backward()
            torch.nn.utils.clip_grad_norm_([q for q in trainer.model.parameters() if q.requires_grad],
                                           cfg.max_grad_norm)
            trainer.opt.step()
            trainer.opt.zero_grad(set_to_none=True)
            trainer.step += 1
            m.update(mode="offline", round=trainer.round, run_id=trainer.run_id)
            log.write(trainer.step, m)
            history.append(m)
    cid, folder = trainer.save(history)
    return TrainResult(cid, folder, trainer.step, history, log.path)
