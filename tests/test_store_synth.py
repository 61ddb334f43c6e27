"""Synthetic rows for the store/query/split/report tests (helpers; no tests here)."""

import json

from mining.tasks import load_suite

PROV = {"round": 0, "policy": "replay", "gpu": "NVIDIA H200", "torch": "2.11", "cuda": "13.0",
        "harness_version": "0.1.0", "reward_version": "0.1.0"}

CODE = """import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * {k}
"""


def task(tid="l3_01_mlp"):
    return load_suite("level3", ids=[tid], import_check=False).tasks[0]


def turns(run_id="r1", task_id="l3_01_mlp", traj="t1"):
    """planner -> coder draft -> verifier -> coder revise -> verifier, plus a malformed coder turn."""
    t = task(task_id)
    base = {**PROV, "run_id": run_id, "task_id": task_id, "trajectory_id": traj,
            "task_hash": t.hash}
    rows = [
        {**base, "turn_id": f"{traj}-0", "turn_index": 0, "role": "planner", "action": "plan"},
        {**base, "turn_id": f"{traj}-1", "turn_index": 1, "role": "coder", "action": "draft",
         "parent_turn_id": f"{traj}-0", "subtask_index": 0,
         "subtask_json": json.dumps({"name": "fuse linear+relu"}), "code": CODE.format(k=1),
         "response": "```python\n" + CODE.format(k=1) + "```", "status": "incorrect"},
        {**base, "turn_id": f"{traj}-2", "turn_index": 2, "role": "verifier", "action": "verify",
         "parent_turn_id": f"{traj}-1",
         "feedback_json": json.dumps({"text": "output mismatch: scale is wrong"})},
        {**base, "turn_id": f"{traj}-3", "turn_index": 3, "role": "coder", "action": "revise",
         "parent_turn_id": f"{traj}-2", "subtask_index": 0, "code": CODE.format(k=2),
         "status": "ok", "speedup": 1.3},
        {**base, "turn_id": f"{traj}-4", "turn_index": 4, "role": "coder", "action": "revise",
         "parent_turn_id": f"{traj}-2", "code": None, "malformed": "no code block",
         "response": "I think...", "status": "invalid"},
    ]
    return rows


def scores(n=40, run_id="r1"):
    import random

    rnd = random.Random(0)
    out = []
    for i in range(n):
        correct = i % 4 != 0
        sp = rnd.uniform(0.5, 3.0) if correct else None
        cats = ["try_except_fallback"] if i % 10 == 0 else (["precision"] if i % 7 == 0 else [])
        out.append({**PROV, "run_id": run_id, "round": i % 2, "score_id": f"s{i}",
                    "sample_id": f"m{i}", "scorer_version": "v1", "skill": 1 + i % 2,
                    "task_id": f"task{i % 3}", "status": "ok" if correct else "incorrect",
                    "correct": correct, "speedup": sp,
                    "speedup_vs_compile": sp / 1.2 if sp else None,
                    "reward": (min(sp, 5) + 0.3) if sp else 0.0, "hack_categories": cats,
                    "major_hack": i % 10 == 0})
    return out
