"""CPU benchmark: this trainer vs TRL's GRPOTrainer, same tiny model, prompts, reward, settings.

    /work/venv/bin/python bench/grpo_vs_trl.py --steps 6

Prints step time and generated tokens/s for both and the ratio (ours / TRL). Both sample
G completions per prompt with HF generate, train LoRA (same rank/targets) with the same loss
(grpo, beta 0) and one optimizer step per generation batch.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

TARGETS = ["q_proj", "v_proj", "o_proj", "up_proj", "down_proj"]


class Counter:
    def __init__(self) -> None:
        self.tokens = 0

    def ours(self, prompts, completions, meta):
        self.tokens += sum(len(m["completion_ids"]) for m in meta)
        return [sum(t % 5 == 0 for t in m["completion_ids"]) / max(1, len(m["completion_ids"])) for m in meta]

    def trl(self, prompts, completions, completion_ids, **kw):
        self.tokens += sum(len(c) for c in completion_ids)
        return [sum(t % 5 == 0 for t in c) / max(1, len(c)) for c in completion_ids]


def prompts(n: int) -> list:
    return [[{"role": "user", "content": f"write a fused relu kernel number {i}"}] for i in range(n)]


def run_ours(model: str, a, work: str) -> tuple[float, float]:
    from train.config import TrainConfig
    from train.grpo import GRPOTrainer

    c = Counter()
    cfg = TrainConfig.from_mapping(dict(
        group_size=a.group, prompts_per_step=a.prompts, steps=a.steps + 1, grad_accum=1, lr=1e-3,
        max_completion_length=a.tokens, kl_coef=0.0, device="cpu", async_rewards=False,
        lora={"r": 8, "alpha": 16, "dropout": 0.0, "target_modules": TARGETS},
        log={"tensorboard": False}))
    tr = GRPOTrainer(cfg, model, c.ours, prompts(8), store_root=work, run_id="bench")
    res = tr.train()
    h = res.history[1:]                         # first step is warm-up
    wall = sum(x["step_s"] for x in h)
    return wall / len(h), sum(x["completion_tokens"] for x in h) / wall


def run_trl(model: str, a, work: str) -> tuple[float, float]:
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    c = Counter()
    times: list[float] = []
    toks: list[int] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.t, self.n = time.perf_counter(), c.tokens

        def on_step_end(self, args, state, control, **kw):
            times.append(time.perf_counter() - self.t)
            toks.append(c.tokens - self.n)

    tok = AutoTokenizer.from_pretrained(model)
    args = GRPOConfig(output_dir=os.path.join(work, "trl"), num_generations=a.group,
                      per_device_train_batch_size=a.group * a.prompts, gradient_accumulation_steps=1,
                      max_completion_length=a.tokens, max_steps=a.steps + 1, learning_rate=1e-3,
                      beta=0.0, loss_type="grpo", logging_steps=1, report_to=[], use_cpu=True,
                      bf16=False, save_strategy="no", temperature=1.0, disable_tqdm=True)
    tr = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(model), reward_funcs=c.trl,
                     args=args, train_dataset=Dataset.from_list([{"prompt": p} for p in prompts(8)]),
                     processing_class=tok, callbacks=[Timer()],
                     peft_config=LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=TARGETS,
                                            task_type="CAUSAL_LM"))
    tr.train()
    t, n = times[1:], toks[1:]
    return sum(t) / len(t), sum(n) / sum(t)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--prompts", type=int, default=2)
    p.add_argument("--tokens", type=int, default=32)
    a = p.parse_args()
    torch.manual_seed(0)
    from agents.tiny_model import build_tiny_model

    with tempfile.TemporaryDirectory() as work:
        model = str(build_tiny_model(Path(work) / "tiny", hidden=64, layers=2, heads=4))
        ours = run_ours(model, a, work)
        trl = run_trl(model, a, work)
    print(f"{'trainer':<10}{'step s':>10}{'gen tok/s':>12}")
    print(f"{'kernelmine':<10}{ours[0]:>10.3f}{ours[1]:>12.1f}")
    print(f"{'trl':<10}{trl[0]:>10.3f}{trl[1]:>12.1f}")
    print(f"ratio ours/trl: step time {ours[0] / trl[0]:.2f}x, tokens/s {ours[1] / trl[1]:.2f}x "
          f"(G={a.group}, prompts/step={a.prompts}, max tokens={a.tokens}, {a.steps} timed steps)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
