"""Sample rows -> the row layouts TRL and verl read for RL (pure: dicts in, dicts out)."""

from __future__ import annotations

import json

META = ("sample_id", "skill", "task_id", "reference_hash", "round", "policy", "negative",
        "reward", "correct", "speedup", "speedup_vs_compile", "major_hack", "scorer_version")


def trl_row(s: dict) -> dict:
    """TRL (GRPOTrainer, conversational): ``prompt`` as chat messages; the other columns reach
    reward functions as keyword arguments.

    >>> r = trl_row({"messages_json": '[{"role": "user", "content": "hi"}]', "code": "c"})
    >>> r["prompt"], r["completion"][0]["content"]
    ([{'role': 'user', 'content': 'hi'}], 'c')
    """
    row = {"prompt": json.loads(s["messages_json"]),
           "completion": [{"role": "assistant", "content": s.get("code") or ""}]}
    row.update({k: s.get(k) for k in META})
    return row


def verl_row(s: dict, index: int, split: str = "train") -> dict:
    """verl RL Parquet: data_source, prompt, ability, reward_model{style, ground_truth}, extra_info.

    ``ground_truth`` is the task id + reference hash: verl's reward function re-evaluates
    candidates against that reference through the harness.
    """
    return {
        "data_source": f"kernelmine/skill{s['skill']}",
        "prompt": json.loads(s["messages_json"]),
        "ability": "cuda",
        "reward_model": {"style": "rule",
                         "ground_truth": json.dumps({"task_id": s["task_id"],
                                                     "reference_hash": s["reference_hash"]})},
        "extra_info": {"split": split, "index": index, "response": s.get("code") or "",
                       **{k: s.get(k) for k in META}},
    }
