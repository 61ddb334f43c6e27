"""``python -m mining eval <task id or file> <candidate.py> [overrides]``: one JSON object on stdout.

``python -m mining eval <run dir | tree | file.jsonl> [--force]`` scores many existing programs
into the store instead (KernelBench's ``eval_from_generations`` for this toolkit): eval_many.py.

Exit 0 whenever an evaluation ran (whatever the candidate's fate); 2 for usage errors.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

from omegaconf import OmegaConf

from mining.errors import UserError
from mining.tasks import load_file, load_tasks


def _task(spec: str, cfg):
    if spec.endswith(".py") or Path(spec).is_file():
        if not Path(spec).is_file():
            raise UserError(f"task file {spec} does not exist")
        try:
            return load_file(spec)
        except ValueError as e:
            raise UserError(str(e)) from e
    try:
        report = load_tasks(cfg.task)
    except (FileNotFoundError, ValueError) as e:
        raise UserError(str(e)) from e
    hits = [t for t in report.tasks if spec in (t.id, t.id.split("_")[-1], t.name)]
    if not hits:
        raise UserError(f"no task {spec!r}; `python -m mining tasks` lists the known ids")
    return hits[0]


def _is_source(args: list[str]) -> bool:
    """One path (a directory, or a .jsonl file), or ``--force``: the many-program form."""
    paths = [a for a in args if a != "--force"]
    return "--force" in args or (len(paths) == 1 and (
        Path(paths[0]).expanduser().is_dir() or paths[0].endswith((".jsonl", ".ndjson"))))


def main(cfg, args: list[str]) -> int:
    if _is_source(args):
        from mining.stages import eval_many

        return eval_many.main(cfg, args)
    if len(args) != 2:
        raise UserError("eval takes <task id or file> <candidate.py>, or one run directory, "
                        "<task>/<file>.py tree or JSONL file of programs")
    task = _task(args[0], cfg)
    cand = Path(args[1])
    if not cand.is_file():
        raise UserError(f"candidate file {cand} does not exist")
    from rewards.harness import HarnessConfig, evaluate

    try:
        hcfg = HarnessConfig.from_mapping(OmegaConf.to_container(cfg.harness, resolve=True))
    except ValueError as e:
        raise UserError(str(e)) from e
    with contextlib.redirect_stdout(sys.stderr):  # stdout carries the JSON object only
        result = evaluate(task, cand.read_text(), hcfg)
    out = result.to_dict()
    # The reward layer is pure and cheap: add its verdict so one call answers "what would the
    # policy be paid for this, and why".
    from rewards import score

    rec = score(task.source, cand.read_text(), result, skill=1,
                cfg=OmegaConf.to_container(cfg.rewards, resolve=True))
    reward = rec.to_dict()
    out["findings"] = reward.pop("findings")
    out["reward"] = reward.pop("reward")
    out["reward_detail"] = reward
    print(json.dumps(out, default=str))
    return 0
