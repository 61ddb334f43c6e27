"""Eager vs torch.compile baselines for every embedded Level 3 task, at full size on the GPU.

    python3 bench/suite_baselines.py                      # GPU machine, writes $OUT or bench/results
    python3 bench/suite_baselines.py --tasks gpt,lstm     # a subset (ids or name substrings)
    python3 bench/suite_baselines.py --device cpu --small # CPU smoke run at the `small` sizes

Protocol per task: seed 42, build the model and three input sets on the device, TF32 off,
inference mode; 3 warm-up calls, then the median of --iters calls (input sets rotated), each
timed with CUDA events and a device sync. torch.compile (default mode) is timed the same way
after its first call, whose wall time is recorded as the compile time. A compile failure is
recorded for that task and the run carries on. The ratio eager/compile compares the two in
the same run; the geometric mean over the tasks that have both is the suite figure.

Needs only torch and pyyaml (no hydra/omegaconf/duckdb/polars), so it runs on a bare GPU node.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from rewards.harness.reference import load_module, meta_device  # noqa: E402

SEED = 42
INPUT_SETS = 3
# The bar every embedded task must clear at full size (roughly >= 1 ms eager on an H200, fp32).
MIN_FLOPS = 1e11
MIN_BYTES = 8e9


def load_level3(ids: list[str] | None = None) -> list[Any]:
    """The embedded suite's tasks (``mining.tasks.Task`` objects), optionally filtered."""
    from mining.tasks import load_suite

    tasks = load_suite("level3", import_check=False).tasks
    if not ids:
        return tasks
    want = [i.strip().lower() for i in ids if i.strip()]
    return [t for t in tasks if any(w == t.id.lower() or w in t.id.lower() or w in t.name.lower()
                                    for w in want)]


# ---------------------------------------------------------------------------------------------
# Cost estimate on the meta device (no memory allocated, no kernels run)


class _ByteCounter(TorchDispatchMode):
    """Sums the bytes every non-view op reads and writes: eager's memory traffic, roughly."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not getattr(func, "is_view", False):
            for x in torch.utils._pytree.tree_leaves((args, kwargs, out)):
                if isinstance(x, torch.Tensor):
                    self.bytes += x.numel() * x.element_size()
        return out


def estimate_cost(source: str, overrides: dict | None = None) -> dict[str, float]:
    """FLOPs and memory traffic of one reference forward, traced on the meta device.

    FLOPs count matmuls and convs (FlopCounterMode); bytes count every non-view op's operands
    and results, so memory-bound models (depthwise convs, scans) are measured too.
    """
    with contextlib.redirect_stdout(io.StringIO()):
        mod = load_module(source, overrides)
    with meta_device(), torch.no_grad():
        torch.manual_seed(SEED)
        model = mod.Model(*mod.get_init_inputs())
        inputs = mod.get_inputs()
        flops, traffic = FlopCounterMode(display=False), _ByteCounter()
        with flops, traffic:
            model(*inputs)
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    in_bytes = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))
    return {"flops": float(flops.get_total_flops()), "bytes": float(traffic.bytes),
            "param_bytes": float(params), "input_bytes": float(in_bytes)}


def meets_bar(cost: dict[str, float]) -> bool:
    return cost["flops"] >= MIN_FLOPS or cost["bytes"] >= MIN_BYTES


# ---------------------------------------------------------------------------------------------
# Timing


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _to(x: Any, device: torch.device) -> Any:
    return x.to(device) if isinstance(x, torch.Tensor) else x


def time_calls(fn, input_sets: list[list[Any]], device: torch.device, warmup: int,
               iters: int) -> float:
    """Median milliseconds per call: CUDA events on the current stream (host clock on CPU)."""
    for i in range(warmup):
        fn(*input_sets[i % len(input_sets)])
    _sync(device)
    times = []
    for i in range(iters):
        args = input_sets[i % len(input_sets)]
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(*args)
            end.record()
            torch.cuda.synchronize(device)
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn(*args)
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _precision_off() -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def bench_task(task: Any, device: torch.device, small: bool, warmup: int, iters: int,
               compile_: bool) -> dict[str, Any]:
    overrides = task.small if small else None
    row: dict[str, Any] = {"id": task.id, "name": task.name, "family": task.family,
                           "hash": task.hash, "small": small}
    row.update(estimate_cost(task.source, overrides))
    with contextlib.redirect_stdout(io.StringIO()):
        mod = load_module(task.source, overrides, name=task.id)
    torch.manual_seed(SEED)
    model = mod.Model(*mod.get_init_inputs()).to(device)
    input_sets = []
    for k in range(INPUT_SETS):
        torch.manual_seed(SEED + 1 + k)
        input_sets.append([_to(x, device) for x in mod.get_inputs()])
    with torch.no_grad():
        row["eager_ms"] = time_calls(model, input_sets, device, warmup, iters)
        if compile_:
            torch._dynamo.reset()
            try:
                compiled = torch.compile(model)
                t0 = time.perf_counter()
                compiled(*input_sets[0])
                _sync(device)
                row["compile_wall_s"] = time.perf_counter() - t0
                row["compile_ms"] = time_calls(compiled, input_sets, device, warmup, iters)
                row["eager_over_compile"] = row["eager_ms"] / row["compile_ms"]
            except Exception as e:  # noqa: BLE001 - a compiler failure is a result, not a crash
                row["compile_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
            finally:
                torch._dynamo.reset()
    # keys the harness uses for reference timings
    row["ref_runtime_us"] = row["eager_ms"] * 1e3
    if "compile_ms" in row:
        row["ref_compile_runtime_us"] = row["compile_ms"] * 1e3
    del model, input_sets
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return row


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


# ---------------------------------------------------------------------------------------------
# Report


def _fmt(v: Any, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def table(rows: list[dict], skipped: list[str]) -> str:
    lines = ["| task | family | GFLOP | GB moved | eager ms | compile ms | eager/compile "
             "| compile s |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        ratio = _fmt(r.get("eager_over_compile"), ".2f")
        if "compile_error" in r:
            ratio = "compile failed"
        lines.append(
            f"| {r['id']} | {r['family']} | {r['flops'] / 1e9:.4g} | {r['bytes'] / 1e9:.4g} "
            f"| {_fmt(r.get('eager_ms'), '.3f')} | {_fmt(r.get('compile_ms'), '.3f')} "
            f"| {ratio} | {_fmt(r.get('compile_wall_s'), '.1f')} |")
    gm = geomean([r["eager_over_compile"] for r in rows if "eager_over_compile" in r])
    n = sum("eager_over_compile" in r for r in rows)
    lines.append("")
    lines.append(f"geometric mean eager/compile: {_fmt(gm, '.3f')} over {n} of {len(rows)} tasks")
    for r in rows:
        if "compile_error" in r:
            lines.append(f"- {r['id']}: torch.compile failed: {r['compile_error']}")
    for s in skipped:
        lines.append(f"- {s}: skipped, --max-seconds budget spent")
    return "\n".join(lines)


def environment(device: torch.device) -> dict[str, Any]:
    env = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": str(device),
           "tf32": False, "seed": SEED}
    if device.type == "cuda":
        env["gpu"] = torch.cuda.get_device_name(device)
    return env


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    p.add_argument("--small", action="store_true", help="use each task's `small` sizes")
    p.add_argument("--tasks", default="", help="comma-separated task ids or name substrings")
    p.add_argument("--out", default=os.environ.get("OUT") or str(REPO / "bench" / "results"),
                   help="directory for level3_baselines.json/.md (default $OUT, else bench/results)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--no-compile", action="store_true", help="time eager only")
    p.add_argument("--max-seconds", type=float, default=360.0,
                   help="start no new task after this many seconds (the rest are reported skipped)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: no CUDA device is visible; pass --device cpu --small for a CPU run.",
              file=sys.stderr)
        return 2
    if args.iters < 1:
        print("error: --iters must be at least 1.", file=sys.stderr)
        return 2
    tasks = load_level3(args.tasks.split(",") if args.tasks else None)
    if not tasks:
        print(f"error: no embedded task matches --tasks {args.tasks!r}.", file=sys.stderr)
        return 2
    _precision_off()
    t_start = time.perf_counter()
    rows, skipped = [], []
    for i, task in enumerate(tasks):
        if time.perf_counter() - t_start > args.max_seconds:
            skipped = [t.id for t in tasks[i:]]
            print(f"time budget of {args.max_seconds:.0f} s spent: skipping {', '.join(skipped)}",
                  flush=True)
            break
        t0 = time.perf_counter()
        row = bench_task(task, device, args.small, args.warmup, args.iters, not args.no_compile)
        row["task_wall_s"] = time.perf_counter() - t0
        rows.append(row)
        print(f"{task.id}: eager {row['eager_ms']:.3f} ms, compile "
              f"{_fmt(row.get('compile_ms'), '.3f')} ms"
              + (f" ({row['compile_error']})" if "compile_error" in row else "")
              + f" [{row['task_wall_s']:.1f} s]", flush=True)
    md = table(rows, skipped)
    print()
    print(md)
    gm = geomean([r["eager_over_compile"] for r in rows if "eager_over_compile" in r])
    report = {"environment": environment(device), "protocol": {
        "warmup": args.warmup, "iters": args.iters, "input_sets": INPUT_SETS, "stat": "median",
        "compile_mode": "default", "grad": False}, "tasks": rows, "skipped": skipped,
        "geomean_eager_over_compile": gm, "total_wall_s": time.perf_counter() - t_start}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "level3_baselines.json").write_text(json.dumps(report, indent=2) + "\n")
    env = report["environment"]
    head = (f"# Level 3 suite baselines\n\n{env.get('gpu', env['device'])}, torch {env['torch']}"
            f" (CUDA {env['cuda']}), fp32, TF32 off, median of {args.iters} calls"
            f"{', small sizes' if args.small else ''}.\n\n")
    (out / "level3_baselines.md").write_text(head + md + "\n")
    print(f"\nwrote {out / 'level3_baselines.json'} and {out / 'level3_baselines.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
