"""``python -m mining cycle rounds=N +task=level3``: N rounds of mine, split, score, train.

    python -m mining cycle rounds=2 +task=level3 model=hf model.path=/models/coder train.steps=20
"""

from __future__ import annotations

import json

from mining.errors import UserError


def main(cfg, args: list[str]) -> int:
    from mining.cycle import run_cycle

    rounds = int(cfg.get("rounds") or cfg.train.get("rounds") or 1)
    if rounds < 1:
        raise UserError(f"rounds must be at least 1, got {rounds}")
    if cfg.model.get("backend") not in ("hf", "vllm") and not cfg.train.get("model"):
        raise UserError("cycle trains the coder: use model=hf model.path=/path/to/model "
                        "(or model=vllm), or set train.model")
    recs = run_cycle(cfg, rounds, cycle_id=(str(cfg.run_id) if cfg.get("run_id") else None))
    for rec in recs:
        t = rec["train"]
        print(json.dumps({"round": rec["round"], "run_id": rec["run_id"],
                          "coder_adapter": rec["coder_adapter"], "checkpoint": t["checkpoint_id"],
                          "adapter": t["adapter"], "reward_first": t["reward_first"],
                          "reward_last": t["reward_last"],
                          "stage_s": {k: round(v, 2) for k, v in rec["time_s"].items()},
                          "train_split_s": {k: round(v, 2) for k, v in t["time"].items()}}))
    return 0
