"""``python -m mining tasks``: list tasks with parameter counts, input shapes and known timings."""

from __future__ import annotations

import contextlib
import io
import sys
import warnings

import torch
from rich.console import Console
from rich.table import Table

from mining.errors import UserError
from mining.tasks import Task, load_tasks
from rewards.harness.reference import load_module, meta_device


def _count(mod, device_ctx) -> int:
    with device_ctx:
        model = mod.Model(*mod.get_init_inputs())
    return sum(p.numel() for p in model.parameters())


def _shapes(mod) -> list:
    with meta_device():
        inputs = mod.get_inputs()
    return [tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__ for x in inputs]


def describe(task: Task) -> dict:
    """Parameter count and input shapes, computed on the meta device (nothing allocated).

    Some real references cannot be built on the meta device (Swin calls ``.item()`` in its
    constructor): those are built on the CPU; when that fails too, only what could be computed
    is shown and ``note`` says why. Never raises.
    """
    out: dict = {"params": None, "inputs": None, "note": None}
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            mod = load_module(task.source, name=task.id)
        except Exception as e:  # noqa: BLE001 - a description must never end the listing
            out["note"] = f"not described: {_why(e)}"
            return out
        try:
            out["inputs"] = _shapes(mod)
        except Exception as e:  # noqa: BLE001
            out["note"] = f"input shapes unknown: {_why(e)}"
        try:
            out["params"] = _count(mod, meta_device())
        except Exception as meta_err:  # noqa: BLE001 - fall back to a real (CPU) build
            try:
                with torch.no_grad():
                    out["params"] = _count(mod, torch.device("cpu"))
                out["note"] = out["note"] or f"built on cpu (meta device: {_why(meta_err)})"
            except Exception as e:  # noqa: BLE001
                out["note"] = f"parameters unknown: {_why(e)}"
    return out


def _why(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:120]


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
    rows = []
    for t in report.tasks:
        d = describe(t)
        tm = known_timings(t)
        note = [d["note"]] if d["note"] else []
        if tm.get("unverifiable"):  # the reference ignores its inputs: correctness unverifiable
            note.insert(0, f"UNVERIFIABLE: {tm['unverifiable']}")
        params = "?" if d["params"] is None else f"{d['params'] / 1e6:.2f}M"
        shapes = "?" if d["inputs"] is None else " ".join(str(list(s)) for s in d["inputs"])
        rows.append((t.id, t.name, t.family, params, shapes, _fmt_us(tm.get("ref_runtime_us")),
                     _fmt_us(tm.get("ref_compile_runtime_us")), "; ".join(note)))
    cols = ["id", "name", "family", "params", "input shapes", "eager ms", "compile ms", "note"]
    if not any(r[-1] for r in rows):  # the note column only when a task has one
        cols, rows = cols[:-1], [r[:-1] for r in rows]
    table = Table(title=f"{len(report.tasks)} tasks")
    for col in cols:
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(*r)
    Console().print(table)
    for err in report.errors:
        print(f"skipped {err}", file=sys.stderr)
    if not report.tasks:
        raise UserError("no task matched; check task.ids / task.names")
    return 0
