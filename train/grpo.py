"""Online GRPO with LoRA: generate G completions per prompt, reward them, update the adapter.

``reward_fn(prompts, completions, meta) -> list[float]`` (or a Future / list of Futures of
floats; NaN = could not be computed, left out of its group). With ``async_rewards`` the rewards
of batch k are computed in a thread while batch k+1 generates; batch k+1 is then one update
stale, which the importance ratio against its sampling-time log-probs corrects.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import random
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from train import checkpoint as ckpt
from train import distributed
from train.advantages import group_advantages, group_stats
from train.config import TrainConfig
from train.logging import StepLog
from train.loss import LossConfig, completion_logps, grpo_loss
from train.policy import load_policy, pick_device
from train.rollout import Rollout, generate_hf

RewardFn = Callable[[list, list[str], list[dict]], Sequence]


@dataclass
class TrainResult:
    checkpoint_id: str | None
    checkpoint_dir: Path | None
    steps: int
    history: list[dict] = field(default_factory=list)
    log_path: Path | None = None


def _resolve(value):
    if isinstance(value, cf.Future):
        value = value.result()
    return [float(v.result() if isinstance(v, cf.Future) else v) for v in value]


def _timed_reward(fn: RewardFn, r: Rollout) -> tuple[list[float], float]:
    t0 = time.perf_counter()
    out = _resolve(fn(r.prompts, r.completions, r.meta))
    if len(out) != len(r.completions):
        raise ValueError(f"reward_fn returned {len(out)} rewards for {len(r.completions)} completions")
    return out, time.perf_counter() - t0


class GRPOTrainer:
    def __init__(self, cfg: TrainConfig, base_model: str, reward_fn: RewardFn,
                 prompts: list, metas: list[dict] | None = None, store_root: str | Path = "./data",
                 run_id: str | None = None, round_: int = 0) -> None:
        if not prompts:
            raise ValueError("no prompts to train on")
        self.cfg, self.reward_fn, self.base_model = cfg, reward_fn, base_model
        self.prompts, self.metas = list(prompts), list(metas or [{} for _ in prompts])
        self.store_root, self.round = Path(store_root).expanduser(), round_
        self.run_id = run_id or f"train-{uuid.uuid4().hex[:8]}"
        self.dist = distributed.setup(cfg.parallel, cfg.device)  # torchrun: one rank per GPU
        self._check_world(cfg)
        self.device = pick_device(cfg.device)
        random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)
        resume_dir = ckpt.resolve(self.store_root, cfg.resume) if cfg.resume else None
        adapter = str(resume_dir / "adapter") if resume_dir else cfg.adapter
        self.model, self.tok = load_policy(base_model, cfg.lora, adapter, self.device)
        self.model = distributed.shard_model(self.model, self.dist)
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.dist.broadcast_params(params)
        if self.dist.enabled:  # same init everywhere, different samples per rank
            torch.manual_seed(cfg.seed + self.dist.rank)
        self.opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.step = ckpt.load_state(resume_dir, self.opt) if resume_dir else 0
        self.loss_cfg = LossConfig(cfg.loss_type, cfg.epsilon_low, cfg.epsilon_high, cfg.kl_coef,
                                   cfg.max_completion_length)
        self.data_hash = ckpt.data_hash(self.prompts)
        self._order: list[int] = []

    def _check_world(self, cfg: TrainConfig) -> None:
        w = self.dist.world
        if cfg.prompts_per_step % w or (cfg.prompts_per_step // w * cfg.group_size) % cfg.grad_accum:
            raise ValueError(f"train.prompts_per_step={cfg.prompts_per_step} must split over {w} ranks "
                             f"into whole groups of {cfg.group_size} divisible by grad_accum={cfg.grad_accum}")

    # -- pieces ------------------------------------------------------------------------------
    def autocast(self):
        if self.device.type == "cuda" and self.cfg.bf16:
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def next_prompts(self) -> tuple[list, list[dict]]:
        idx = []
        while len(idx) < self.cfg.prompts_per_step:
            if not self._order:
                self._order = list(range(len(self.prompts)))
                random.shuffle(self._order)
            idx.append(self._order.pop())
        return [self.prompts[i] for i in idx], [self.metas[i] for i in idx]

    def generate(self) -> Rollout:
        p, m = self.next_prompts()
        blk = self.dist.block(len(p))  # this rank's prompts of the global batch
        p, m = p[blk], m[blk]
        if self.cfg.generator == "vllm":
            raise ValueError("train.generator=vllm is not wired yet; use train.generator=hf")
        r = generate_hf(self.model, self.tok, p, m, self.cfg.group_size, self.cfg.max_completion_length,
                        self.cfg.temperature, self.cfg.top_p, self.cfg.max_prompt_length, self.autocast)
        r.old_logps = None
        if self.cfg.async_rewards or self.cfg.num_iterations > 1:
            r.old_logps = self._logps(r, slice(None), grad=False)[0]
        return r

    def _logps(self, r: Rollout, sl, grad: bool, ref: bool = False):
        ids = torch.cat([r.prompt_ids[sl], r.completion_ids[sl]], 1)
        am = torch.cat([r.prompt_mask[sl], r.completion_mask[sl]], 1)
        ctx = torch.enable_grad() if grad else torch.no_grad()
        adapter_off = self.model.disable_adapter() if ref else contextlib.nullcontext()
        with ctx, adapter_off, self.autocast():
            return completion_logps(self.model, ids, am, r.completion_ids.size(1), self.cfg.temperature)

    def update(self, r: Rollout, rewards: list[float]) -> dict:
        """One optimizer step on this rank's rollout ``r``; ``rewards`` are the global batch's."""
        cfg = self.cfg
        adv = group_advantages(rewards, cfg.group_size, cfg.scale_std, cfg.scale)
        adv_all, adv = adv, adv[self.dist.block(adv.numel())].to(self.device)
        n = adv.numel()
        mb = n // cfg.grad_accum
        sums: dict[str, float] = {}
        self.model.train()
        for _ in range(cfg.num_iterations):
            for s in range(0, n, mb):
                sl = slice(s, s + mb)
                logps, ent = self._logps(r, sl, grad=True)
                ref = self._logps(r, sl, grad=False, ref=True)[0] if cfg.kl_coef else None
                old = r.old_logps[sl] if r.old_logps is not None else None
                loss, m = grpo_loss(logps, old, adv[sl], r.completion_mask[sl].to(self.device),
                                    self.loss_cfg, ref_logps=ref, entropy=ent)
                (loss / cfg.grad_accum).backward()
                m["loss"] = float(loss.detach())
                for k, v in m.items():
                    sums[k] = sums.get(k, 0.0) + v
            trainable = [p for p in self.model.parameters() if p.requires_grad]
            self.dist.average_grads(trainable)
            gn = torch.nn.utils.clip_grad_norm_(trainable, cfg.max_grad_norm)
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
        k = cfg.grad_accum * cfg.num_iterations
        out = self.dist.average_metrics({key: v / k for key, v in sums.items()})
        out.update(grad_norm=float(gn), adv_mean=float(adv_all.mean()), adv_std=float(adv_all.std()),
                   adv_abs_mean=float(adv_all.abs().mean()))
        return out

    # -- loop --------------------------------------------------------------------------------
    def train(self) -> TrainResult:
        cfg = self.cfg
        total = cfg.steps or max(1, cfg.epochs * len(self.prompts) // cfg.prompts_per_step)
        history: list[dict] = []
        pool = cf.ThreadPoolExecutor(1, thread_name_prefix="reward")
        log = StepLog(self.store_root, self.run_id, bool(cfg.log.get("tensorboard", True))) \
            if self.dist.main else None
        try:
            roll = self.generate()
            fut = pool.submit(_timed_reward, self.reward_fn, roll)
            while self.step < total:
                t0 = time.perf_counter()
                gen_s = roll.gen_s
                nxt = nfut = None
                if cfg.async_rewards and self.step + 1 < total:
                    nxt = self.generate()            # overlaps the reward of `roll`
                    nfut = pool.submit(_timed_reward, self.reward_fn, nxt)
                tw = time.perf_counter()
                rewards, eval_s = fut.result()
                rewards = self.dist.gather_floats(rewards)  # the global batch, in rank order
                wait_s = time.perf_counter() - tw
                tu = time.perf_counter()
                m = self.update(roll, rewards)
                update_s = time.perf_counter() - tu
                self.step += 1
                if not cfg.async_rewards and self.step < total:
                    nxt = self.generate()
                    nfut = pool.submit(_timed_reward, self.reward_fn, nxt)
                wall = time.perf_counter() - t0 + (0.0 if cfg.async_rewards else gen_s)
                ntok = int(roll.completion_mask.sum()) * self.dist.world  # about: rank 0's times world
                rec = {**group_stats(torch.tensor(rewards), cfg.group_size), **m,
                       "completion_tokens": ntok, "completion_len": ntok / len(rewards),
                       "gen_s": gen_s, "eval_s": eval_s, "reward_wait_s": wait_s,
                       "update_s": update_s, "step_s": wall,
                       "tokens_per_s": ntok / gen_s if gen_s else 0.0,
                       "eval_share": eval_s / wall if wall else 0.0,
                       "round": self.round, "run_id": self.run_id}
                if log is not None:
                    log.write(self.step, rec)
                history.append(rec)
                if cfg.save_every and self.step % cfg.save_every == 0 and self.step < total:
                    self.save(history)
                roll, fut = nxt, nfut
        finally:
            if log is not None:
                log.close()
            pool.shutdown(wait=True, cancel_futures=True)
        cid, folder = self.save(history)
        return TrainResult(cid, folder, self.step, history, log.path if log is not None else None)

    def save(self, history: list[dict]) -> tuple[str, Path]:
        cid = f"{self.run_id}-r{self.round}-s{self.step}"
        folder = self.store_root / "checkpoints_data" / cid
        last = history[-5:] if history else []
        rm = [h["reward_mean"] for h in last if h.get("reward_mean") is not None]
        rs = [h["reward_std"] for h in last if h.get("reward_std") is not None]
        meta = {"checkpoint_id": cid, "run_id": self.run_id, "round": self.round, "step": self.step,
                "base_model": str(self.base_model), "policy": f"{self.base_model}+{cid}",
                "reward_mean": sum(rm) / len(rm) if rm else None,
                "reward_std": sum(rs) / len(rs) if rs else None,
                "reward_first": history[0]["reward_mean"] if history else None,
                "data_hash": self.data_hash, "n_prompts": len(self.prompts),
                "config": {k: v for k, v in vars(self.cfg).items() if k != "lora"},
                "lora": vars(self.cfg.lora)}
        full = distributed.full_trainable_state(self.model, self.dist)  # FSDP: gathered on all ranks
        if self.dist.main:  # one writer; the others wait so the folder exists when they return
            ckpt.save(folder, self.model, self.opt, self.step, meta, state_dict=full)
            ckpt.register(self.store_root, cid, folder, meta)
        self.dist.barrier()
        return cid, folder
