"""Run by tests/test_train_ddp.py, alone or under torchrun (gloo on CPU); writes JSON results.

    python tests/ddp_worker.py update <tiny model> <out dir>      # fixed rollout, K updates
    python tests/ddp_worker.py train  <tiny model> <out dir>      # the whole online loop
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from train.config import TrainConfig  # noqa: E402
from train.grpo import GRPOTrainer  # noqa: E402
from train.rollout import Rollout  # noqa: E402

PROMPTS = [[{"role": "user", "content": f"write kernel {i}"}] for i in range(4)]
GLOBAL_PROMPTS, GROUP, STEPS = 2, 4, 3


def cfg(**kw) -> TrainConfig:
    base = dict(group_size=GROUP, prompts_per_step=GLOBAL_PROMPTS, steps=STEPS, grad_accum=2,
                lr=1e-2, max_completion_length=6, kl_coef=0.04, async_rewards=False, bf16=False,
                device=os.environ.get("KM_DDP_DEVICE", "cpu"),  # scripts/gpu_check_scale.sh: cuda
                parallel=os.environ.get("KM_DDP_PARALLEL", "ddp"),
                lora={"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj", "up_proj"]},
                log={"tensorboard": False})
    base.update(kw)
    return TrainConfig.from_mapping(base)


def target_reward(prompts, completions, meta):
    return [sum(1 for t in m["completion_ids"] if t % 5 == 0) / max(1, len(m["completion_ids"])) for m in meta]


def fixed_rollout(vocab: int, step: int) -> tuple[Rollout, list[float]]:
    """The same global batch on every rank: 8 completions (2 prompts x 4), some padding."""
    g = torch.Generator().manual_seed(100 + step)
    n, p, t = GLOBAL_PROMPTS * GROUP, 5, 6
    pids = torch.randint(3, vocab, (n, p), generator=g)
    pmask = torch.ones(n, p, dtype=torch.long)
    pmask[::3, 0] = 0                                   # left padding on some rows
    cids = torch.randint(3, vocab, (n, t), generator=g)
    lens = torch.randint(2, t + 1, (n,), generator=g)
    cmask = (torch.arange(t)[None, :] < lens[:, None]).long()
    rewards = torch.rand(n, generator=g).tolist()
    return Rollout([None] * n, [""] * n, pids, pmask, cids, cmask, [{} for _ in range(n)]), rewards


def block(r: Rollout, sl: slice, dev: torch.device) -> Rollout:
    b = Rollout(r.prompts[sl], r.completions[sl], r.prompt_ids[sl].to(dev), r.prompt_mask[sl].to(dev),
                r.completion_ids[sl].to(dev), r.completion_mask[sl].to(dev), r.meta[sl])
    b.old_logps = None  # one pass per batch: the ratio is taken against the current policy
    return b


def lora_state(model) -> dict[str, torch.Tensor]:
    """The trainable weights as plain full tensors (FSDP holds them as sharded DTensors)."""
    full = lambda p: p.full_tensor() if hasattr(p, "full_tensor") else p  # noqa: E731
    return {n: full(p.detach()).float().cpu().clone() for n, p in model.named_parameters() if p.requires_grad}


def main() -> None:
    mode, model, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    out.mkdir(parents=True, exist_ok=True)
    tag = f"{mode}-w{world}-r{rank}"
    if mode == "update":
        tr = GRPOTrainer(cfg(), model, target_reward, PROMPTS, store_root=out / "store", run_id=tag)
        hist: dict[str, list[float]] = {"loss": [], "grad_norm": [], "kl": []}
        for step in range(STEPS):
            roll, rewards = fixed_rollout(tr.tok.vocab_size, step)
            m = tr.update(block(roll, tr.dist.block(len(rewards)), tr.device), rewards)
            for k, v in hist.items():
                v.append(m[k])
        torch.save(lora_state(tr.model), out / f"{tag}.pt")
        (out / f"{tag}.json").write_text(json.dumps(hist))
    else:
        tr = GRPOTrainer(cfg(), model, target_reward, PROMPTS, store_root=out / "store", run_id="ddp-train")
        res = tr.train()
        h = hashlib.sha256()
        for n, t in sorted(lora_state(tr.model).items()):
            h.update(n.encode() + t.numpy().tobytes())
        (out / f"{tag}.json").write_text(json.dumps({
            "weights": h.hexdigest(), "steps": res.steps, "checkpoint": res.checkpoint_id,
            "log": str(res.log_path) if res.log_path else None,
            "rewards": [x["reward_mean"] for x in res.history]}))
    if tr.dist.enabled:
        torch.distributed.barrier()  # no rank tears the group down while the other still uses it
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
    # results are written: skip the interpreter's teardown, where a gloo/FSDP thread still joinable
    # aborted rank 0 once in CI ("terminate called without an active exception", SIGABRT)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
