"""Data-parallel training under ``torchrun``: rank, world, gradient averaging, rank-0-only I/O.

``torchrun --nproc-per-node N -m mining train ...`` sets RANK / WORLD_SIZE / LOCAL_RANK; each
rank then generates and rewards its share of every step's prompts (the global batch is split,
prompt groups stay whole), the rewards are gathered so advantages and logs see the global
batch, and the LoRA gradients are averaged across ranks before clipping and the optimizer step
(one flat all-reduce per step: the trainable LoRA weights are small, so this is what DDP would
do, without wrapping the peft model whose ``generate`` / ``disable_adapter`` the trainer uses).
Only rank 0 writes logs and checkpoints.

``parallel=fsdp`` shards the base model's decoder layers with FSDP2 (``fully_shard``) for a
model that does not fit one GPU; FSDP then reduces the gradients itself, and checkpoints gather
the adapter whole. Checked on CPU with gloo (tests/test_train_ddp.py), not yet on GPUs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    strategy: str = "ddp"   # ddp | fsdp

    @property
    def enabled(self) -> bool:
        return self.world > 1

    @property
    def main(self) -> bool:
        return self.rank == 0

    def block(self, n: int) -> slice:
        """This rank's contiguous block of ``n`` items (``n`` divisible by the world size)."""
        k = n // self.world
        return slice(self.rank * k, (self.rank + 1) * k)

    def gather_floats(self, xs: list[float]) -> list[float]:
        """Every rank's list, concatenated in rank order (equal lengths)."""
        if not self.enabled:
            return list(xs)
        t = torch.tensor(xs, dtype=torch.float64)
        out = [torch.empty_like(t) for _ in range(self.world)]
        dist.all_gather(out, t)
        return torch.cat(out).tolist()

    def average_grads(self, params: list[torch.nn.Parameter]) -> None:
        if not self.enabled or self.strategy == "fsdp":  # FSDP reduce-scatters in backward
            return
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        flat /= self.world
        off = 0
        for p, g in zip(params, grads, strict=True):
            p.grad = flat[off:off + g.numel()].view_as(g).clone()
            off += g.numel()

    def average_metrics(self, m: dict[str, float]) -> dict[str, float]:
        if not self.enabled:
            return m
        keys = sorted(m)
        t = torch.tensor([float(m[k]) for k in keys], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return {k: float(v) / self.world for k, v in zip(keys, t.tolist(), strict=True)}

    def broadcast_params(self, params: list[torch.nn.Parameter]) -> None:
        """Start every rank from rank 0's trainable weights."""
        if self.enabled and self.strategy != "fsdp":
            with torch.no_grad():
                for p in params:
                    dist.broadcast(p.data, 0)

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()


def setup(strategy: str = "ddp", device: str = "auto") -> Dist:
    """Join the process group torchrun describes (a no-op for a plain single process)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if strategy not in ("ddp", "fsdp"):
        raise ValueError(f"train.parallel must be ddp or fsdp, got {strategy!r}")
    d = Dist(int(os.environ.get("RANK", "0")), world, int(os.environ.get("LOCAL_RANK", "0")), strategy)
    if world == 1:
        return d
    cuda = device != "cpu" and torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(d.local_rank)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    return d


def full_trainable_state(model, d: Dist) -> dict | None:
    """Under FSDP, the LoRA weights gathered whole (a collective: every rank calls it); else None."""
    if not d.enabled or d.strategy != "fsdp":
        return None
    return {n: p.full_tensor().detach().cpu() for n, p in model.named_parameters() if p.requires_grad}


def shard_model(model, d: Dist):
    """FSDP2: each decoder layer, then the whole model, sharded over the ranks."""
    if not d.enabled or d.strategy != "fsdp":
        return model
    from torch.distributed.fsdp import fully_shard

    layers = next((m for name, m in model.named_modules()
                   if name.endswith("layers") and isinstance(m, torch.nn.ModuleList)), None)
    if layers is None:
        raise ValueError("train.parallel=fsdp: no decoder `layers` ModuleList found in the model")
    for layer in layers:
        fully_shard(layer)
    # the root is the HF model inside peft: generate() calls its forward, never PeftModel's
    fully_shard(model.get_base_model() if hasattr(model, "get_base_model") else model)
    return model
