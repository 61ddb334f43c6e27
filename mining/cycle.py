"""Mine-and-train cycles: each round runs mine (run), split, score and train.

The Coder of round r+1 is round r's checkpoint: ``agents.roles.coder.adapter`` points at the
adapter folder (the HF backend loads base + adapter, the vLLM backend a LoRA request); the
Planner and Verifier keep the base model. Round r trains on round r's samples only and
continues from round r-1's adapter.
"""

from __future__ import annotations

import copy
import json
import sys
import time
from collections.abc import Callable

from omegaconf import OmegaConf, open_dict

Stage = Callable[..., object]


def default_stages() -> dict[str, Stage]:
    """The stage functions, imported lazily; a stage that does not exist yet is reported."""
    import importlib

    out: dict[str, Stage] = {}
    for name, mod in (("mine", "run_cmd"), ("split", "split_cmd"), ("score", "score_cmd")):
        try:
            m = importlib.import_module(f"mining.stages.{mod}")
            out[name] = lambda cfg, _m=m: _m.main(cfg, [])
        except ImportError as e:
            out[name] = _missing(name, e)
    from mining.stages.train_cmd import run_train

    out["train"] = lambda cfg, adapter=None: run_train(cfg, adapter=adapter)
    return out


def _missing(name: str, err: Exception) -> Stage:
    def stage(cfg):
        raise RuntimeError(f"the {name} stage is not available ({err})")
    return stage


def round_config(cfg, cycle_id: str, r: int, adapter: str | None):
    """A copy of the config for round r: its run id, round number, the coder's adapter."""
    c = copy.deepcopy(cfg)
    with open_dict(c):
        c.round = r
        c.run_id = f"{cycle_id}-r{r}"
        if "split" in c:
            c.split.run_ids = [c.run_id]
        c.train.samples_run_id = c.run_id
        if adapter:
            roles = c.agents.setdefault("roles", {})
            coder = roles.get("coder") or {}
            roles["coder"] = {**OmegaConf.to_container(OmegaConf.create(coder)), "adapter": adapter}
            c.train.adapter = adapter
    return c


def run_cycle(cfg, rounds: int, stages: dict[str, Stage] | None = None,
              cycle_id: str | None = None, start_adapter: str | None = None) -> list[dict]:
    stages = stages or default_stages()
    cycle_id = cycle_id or f"cycle-{time.strftime('%Y%m%d-%H%M%S')}"
    adapter, out = start_adapter, []
    for r in range(rounds):
        c = round_config(cfg, cycle_id, r, adapter)
        rec = {"round": r, "run_id": c.run_id, "coder_adapter": adapter, "time_s": {}}
        for name in ("mine", "split", "score"):
            t0 = time.perf_counter()
            print(f"cycle: round {r} {name} (coder adapter: {adapter or 'none'})", file=sys.stderr)
            stages[name](c)
            rec["time_s"][name] = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = stages["train"](c, adapter=adapter)
        rec["time_s"]["train"] = time.perf_counter() - t0
        rec["train"] = res
        adapter = res["adapter"]
        out.append(rec)
        print("cycle: " + json.dumps({k: rec[k] for k in ("round", "run_id", "coder_adapter")}
                                     | {"checkpoint": res["checkpoint_id"]}), file=sys.stderr)
    return out
