"""The online reward for skill prompts: extract ModelNew, evaluate it with the harness, score it.

``SkillReward(tasks, harness_cfg, rewards_cfg, executor_cfg)`` is a context manager owning one
executor (``rewards.executors``: the in-process harness ``Evaluator`` or Ray actors); calling it submits every completion of a batch at once (builds overlap) and
returns their rewards. A completion without extractable code scores 0 (a real, bad answer);
a harness crash is scored as a failed result; NaN is left for rewards that could not be computed.
"""

from __future__ import annotations

import concurrent.futures as cf
import importlib
import json
import math
from typing import Any


class SkillReward:
    def __init__(self, tasks: dict, harness_cfg: dict, rewards_cfg: dict | None = None,
                 executor_cfg: dict | None = None) -> None:
        from rewards.executors import make_executor

        self.tasks, self.rcfg = tasks, rewards_cfg or {}
        self.ev = make_executor(executor_cfg, harness_cfg)

    def __enter__(self) -> SkillReward:
        self.ev.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.ev.__exit__(*exc)

    def __call__(self, prompts, completions: list[str], meta: list[dict]) -> list[float]:
        import rewards
        from agents.extract import extract_code
        from rewards.harness import EvalResult

        out: list[float] = [0.0] * len(completions)
        futs: dict[cf.Future, tuple[int, str, Any]] = {}
        for i, (text, m) in enumerate(zip(completions, meta, strict=True)):
            task = self.tasks.get(m.get("task_id"))
            if task is None:
                out[i] = math.nan
                continue
            code = extract_code(text).code
            if code is None:
                continue
            futs[self.ev.submit(task, code)] = (i, code, task)
        for fut in cf.as_completed(futs):
            i, code, task = futs[fut]
            try:
                result = fut.result()
            except Exception as e:  # a harness failure is a failed candidate
                result = EvalResult(status="crashed", error=f"{type(e).__name__}: {e}")
            m = meta[i]
            rec = rewards.score(task.source, code, result, skill=int(m.get("skill") or 1),
                                feedback=m.get("feedback"), cfg=self.rcfg)
            out[i] = float(rec.reward)
        return out


def load_reward_fn(path: str):
    """``pkg.module:function`` -> the function (a user's own reward)."""
    mod, _, name = path.partition(":")
    if not name:
        raise ValueError(f"train.reward must be 'skill' or 'package.module:function', got {path!r}")
    try:
        return getattr(importlib.import_module(mod), name)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"cannot load reward function {path!r}: {e}") from e


def prompts_from_samples(rows: list[dict], skill: int | None = None, run_id: str | None = None,
                         limit: int | None = None) -> tuple[list, list[dict]]:
    """Chat prompts (messages_json) and their metadata from samples-table rows, deduplicated."""
    seen, prompts, metas = set(), [], []
    for r in sorted(rows, key=lambda r: r["sample_id"]):
        if skill is not None and int(r["skill"]) != int(skill):
            continue
        if run_id is not None and r.get("run_id") != run_id:
            continue
        if not r.get("messages_json") or r["messages_json"] in seen:
            continue
        seen.add(r["messages_json"])
        prompts.append(json.loads(r["messages_json"]))
        metas.append({"task_id": r["task_id"], "skill": int(r["skill"]), "sample_id": r["sample_id"]})
    return (prompts[:limit], metas[:limit]) if limit else (prompts, metas)


def prompts_from_tasks(tasks: list, templates: dict[str, str], hardware: str = "") -> tuple[list, list[dict]]:
    """Skill 1 prompts (whole model as one subtask) rendered straight from the task references."""
    from skills.render import render_messages

    prompts, metas = [], []
    for t in tasks:
        prompts.append(render_messages(templates, 1, {
            "hardware": hardware, "reference": t.source, "subtask_index": 1,
            "subtask": "Implement the whole model with custom CUDA kernels."}))
        metas.append({"task_id": t.id, "skill": 1, "sample_id": None})
    return prompts, metas
