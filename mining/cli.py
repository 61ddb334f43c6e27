"""``python -m mining <command> [positional args] [hydra overrides]``.

Commands are imported lazily so that GPU nodes without duckdb/polars can still run
``run``, ``eval`` and ``score``.
"""

from __future__ import annotations

import importlib
import sys

from mining.errors import UserError

# command -> (module under mining.stages, one-line help, positional arguments)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "run": ("run_cmd", "mine Planner/Coder/Verifier trajectories into the store", ""),
    "split": ("split_cmd", "turns -> deduplicated Skill 1 / Skill 2 samples", ""),
    "score": ("score_cmd", "recompile + evaluate + reward every unscored sample", ""),
    "query": ("query_cmd", "SQL over the tables (DuckDB views); --csv/--json",
              '"SQL" | reward_by_skill | hack_rate | speedup_percentiles | best_per_task'),
    "report": ("report_cmd", "HTML report + PNG plots under <root>/report", ""),
    "export": ("export_cmd", "samples -> TRL / verl Parquet or a datasets dataset", "trl|verl|hf"),
    "compact": ("compact_cmd", "merge small Parquet parts", "[table ...]"),
    "train": ("train_cmd", "GRPO + LoRA on the skill prompts; writes a checkpoint", ""),
    "cycle": ("cycle_cmd", "rounds of run, split, score, train (coder r+1 = checkpoint r)", ""),
    "tasks": ("tasks_cmd", "list the tasks of a suite or directory", ""),
    "eval": ("eval_cmd", "evaluate one candidate against one task; prints one JSON object; or score"
             " a KernelBench run dir / <task>/<file>.py tree / JSONL into the store (resumable)",
             "<task id or file> <candidate.py> | <run dir | tree | file.jsonl> [--force]"),
}


def usage() -> str:
    lines = ["usage: python -m mining <command> [args] [hydra overrides]", "", "commands:"]
    for name, (_, text, args) in COMMANDS.items():
        lines.append(f"  {name:<8} {args + '  ' if args else ''}{text}")
    lines += ["", "sweeps: python -m mining <command> -m key=a,b ...  (Hydra multirun, e.g. shard=0,1)",
              "", "examples:", "  python -m mining tasks +task=level3",
              "  python -m mining tasks task=kernelbench task.root=~/KernelBench task.level=3",
              "  python -m mining eval ~/KernelBench/runs/my_run task=kernelbench task.root=~/KernelBench",
              "  python -m mining query disagreements"]
    return "\n".join(lines)


def split_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """Positional arguments vs Hydra overrides (anything with ``=``, or ``+``/``~`` prefixed)."""
    pos, ovr = [], []
    for a in argv:
        # an argument with whitespace is positional (SQL such as "... WHERE skill = 1")
        is_ovr = ("=" in a or a.startswith(("+", "~"))) and not any(c.isspace() for c in a)
        (ovr if is_ovr else pos).append(a)
    return pos, ovr


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in {"-h", "--help", "help"}:
        print(usage())
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        print(f"error: unknown command {command!r}.\n\n{usage()}", file=sys.stderr)
        return 2
    pos, overrides = split_args(rest)
    sweep = [a for a in pos if a in ("-m", "--multirun")]
    pos = [a for a in pos if a not in sweep]
    try:
        if sweep:  # Hydra multirun (e.g. shards): mining/multirun.py
            if pos:
                raise UserError(f"{command} -m takes only overrides, not {pos}")
            from mining.multirun import multirun

            return multirun(command, COMMANDS[command][0], overrides)
        module = importlib.import_module(f"mining.stages.{COMMANDS[command][0]}")
        from mining.config import load_config

        cfg = load_config(overrides)
        return int(module.main(cfg, pos) or 0)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        if str(e).startswith("bad override"):
            print(f"\n{usage()}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; finished work is kept, re-run with the same run_id to resume",
              file=sys.stderr)
        return 130
