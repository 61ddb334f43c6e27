"""The trainer's settings (conf/train/grpo.yaml) as a dataclass; unknown keys fail in one sentence."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class LoraSettings:
    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    target_modules: list[str] = field(default_factory=lambda: [
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])


@dataclass
class TrainConfig:
    model: str | None = None
    adapter: str | None = None
    resume: str | None = None
    mode: str = "online"
    reward: str = "skill"
    samples_run_id: str | None = None
    skill: int | None = None
    max_prompts: int | None = None
    prompts_from_tasks: bool = False
    group_size: int = 6
    prompts_per_step: int = 2
    steps: int = 50
    epochs: int = 8
    grad_accum: int = 2
    num_iterations: int = 1
    lr: float = 1e-6
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    max_prompt_length: int = 4096
    max_completion_length: int = 1024
    temperature: float = 1.0
    top_p: float = 1.0
    loss_type: str = "grpo"
    scale_std: bool = True
    scale: str = "group"
    epsilon_low: float = 0.2
    epsilon_high: float = 0.28
    kl_coef: float = 0.03
    async_rewards: bool = True
    generator: str = "hf"
    bf16: bool = True
    device: str = "auto"
    seed: int = 0
    save_every: int = 0
    parallel: str = "ddp"
    rounds: int = 1
    lora: LoraSettings = field(default_factory=LoraSettings)
    log: dict = field(default_factory=lambda: {"tensorboard": True})
    decontam: dict = field(default_factory=lambda: {"on_match": "refuse", "structural": True})

    @classmethod
    def from_mapping(cls, m: Mapping[str, Any] | None = None, **over: Any) -> TrainConfig:
        d = dict(m or {})
        d.update(over)
        names = {f.name for f in dataclasses.fields(cls)}
        bad = sorted(set(d) - names)
        if bad:
            raise ValueError(f"unknown train setting(s) {', '.join(bad)}; known: {', '.join(sorted(names))}")
        lora = d.pop("lora", None) or {}
        if not isinstance(lora, LoraSettings):
            lora = LoraSettings(**{k: (list(v) if k == "target_modules" else v) for k, v in dict(lora).items()})
        cfg = cls(**d, lora=lora)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        problems = []
        if self.mode not in ("online", "offline"):
            problems.append(f"mode must be online or offline, got {self.mode!r}")
        if self.loss_type not in ("grpo", "bnpo", "dr_grpo"):
            problems.append(f"loss_type must be grpo, bnpo or dr_grpo, got {self.loss_type!r}")
        if self.group_size < 2 and self.mode == "online":
            problems.append("group_size must be at least 2 (advantages are relative to the group)")
        if self.generator not in ("hf", "vllm"):
            problems.append(f"generator must be hf or vllm, got {self.generator!r}")
        if (self.prompts_per_step * self.group_size) % self.grad_accum:
            problems.append(f"prompts_per_step * group_size = {self.prompts_per_step * self.group_size} "
                            f"is not divisible by grad_accum = {self.grad_accum}")
        dc = dict(self.decontam or {})
        if set(dc) - {"on_match", "structural"}:
            problems.append(f"decontam takes on_match and structural, got {sorted(dc)}")
        if dc.get("on_match", "refuse") not in ("refuse", "warn"):
            problems.append(f"decontam.on_match must be refuse or warn, got {dc.get('on_match')!r}")
        if problems:
            raise ValueError("; ".join(problems))
