"""``python -m mining tasks``: list tasks with parameter counts, input shapes and known timings."""

from __future__ import annotations

import contextlib
import io
import sys

import torch
from rich.console import Console
from rich.table import Table

from mining.errors import UserError
from mining.tasks import Task, load_tasks
from rewards.harness.reference import load_module, meta_device


def describe(task: Task) -> dict:
    """Parameter count and input shapes, computed on the meta device (nothing allocated)."""
    with contextlib.redirect_stdout(io.StringIO()):
        mod = load_module(task.source, name=task.id)
        with meta_device():
            model = mod.Model(*mod.get_init_inputs())
            inputs = mod.get_inputs()
    params = sum(p.numel() for p in model.parameters())
    shapes = [tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__ for x in inputs]
    return {"params": params, "inputs": shapes}


def known_timings(task: Task) -> dict:
    try:
        from rewards.harness.baselines import lookup
    except ImportError:  # harness baselines not built yet
        return {}
    return lookup(task.hash) or {}


def _fmt_us(v: float | None) -> str:
    return "-" if v is None else f"{v / 1000:.2f}"


def main(cfg, args: list[str]) -> int:
    try:
        report = load_tasks(cfg.task)
    except (FileNotFoundError, ValueError) as e:
        raise UserError(str(e)) from e
    table = Table(title=f"{len(report.tasks)} tasks")
    for col in ("id", "name", "family", "params", "input shapes", "eager ms", "compile ms"):
        table.add_column(col, overflow="fold")
    for t in report.tasks:
        d = describe(t)
        tm = known_timings(t)
        table.add_row(t.id, t.name, t.family, f"{d['params'] / 1e6:.2f}M",
                      " ".join(str(list(s)) for s in d["inputs"]),
                      _fmt_us(tm.get("ref_runtime_us")), _fmt_us(tm.get("ref_compile_runtime_us")))
    Console().print(table)
    for err in report.errors:
        print(f"skipped {err}", file=sys.stderr)
    if not report.tasks:
        raise UserError("no task matched; check task.ids / task.names")
    return 0
