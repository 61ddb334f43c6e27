"""KernelBench's batch recipe, re-implemented for the throughput bench (KernelBench is not imported).

What ``scripts/eval_from_generations.py`` does with ``build_cache=True`` on one GPU:

1. pre-compile: a process pool (spawn) runs ``build_compile_cache`` on every candidate at once:
   exec the candidate alone (no reference names) with ``TORCH_EXTENSIONS_DIR`` set to the
   sample's own build directory, so module-level ``load_inline`` calls compile there. Builds in
   ``__init__`` or helpers are not reached (nothing is constructed), and a candidate that needs
   the reference's names fails here and is built again at evaluation;
2. evaluate, one candidate after another, in the evaluating process (``eval_kernel_against_ref``):
   exec the reference and then the candidate in one namespace, seed 42, construct both, move them
   to the GPU, ``num_correct_trials`` trials (seeds drawn from seed 42, ``allclose`` at the fp32
   tolerance 1e-4), then ``num_warmup`` synced warm-up calls and ``num_perf_trials`` timed calls
   (sync, L2 flush by filling a 256 MB buffer, CUDA events around one call, sync), mean reported;
   with ``check_for_excessive_speedup`` (KernelBench's default) the reference is timed the same
   way for every candidate. Then ``graceful_eval_cleanup`` (empty cache, sync).

KernelBench's script also spawns a fresh one-process pool per GPU batch; ``isolate=True`` does
that (each candidate in a spawned process). The default runs in this process, which is the
cheaper of the two, so the ratio the bench prints is a conservative one. Differences kept on
purpose: integer inputs are not cast to fp32, and on a CPU device the host clock times calls.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import io
import multiprocessing as mp
import os
import statistics
import time
import traceback

TOL = 1e-4  # KernelBench's fp32 tolerance (atol = rtol)


def _build_dir_prefix(build_dir: str) -> str:
    return f"import os\nos.environ['TORCH_EXTENSIONS_DIR'] = {build_dir!r}\n"


def _objects(build_dir: str) -> int:
    n = 0
    for _, _, files in os.walk(build_dir):
        n += sum(f.endswith(".so") for f in files)
    return n


def precompile_one(src: str, build_dir: str, env: dict) -> dict:
    """KernelBench's ``build_compile_cache`` in a pool worker: exec the candidate alone.
    ``built``: an extension was linked here (a candidate that builds in ``__init__`` links none)."""
    os.environ.update(env)
    os.environ["TORCH_USE_CUDA_DSA"] = "1"
    buf = io.StringIO()
    before = _objects(build_dir)
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            code = _build_dir_prefix(build_dir) + src
            exec(compile(code, "<string>", "exec"), {})
        out = {"compiled": True, "build_s": time.perf_counter() - t0}
    except Exception as e:  # noqa: BLE001 - a failed pre-compile is retried by the evaluation
        out = {"compiled": False, "build_s": time.perf_counter() - t0, "error": f"{type(e).__name__}: {str(e)[-300:]}"}
    out["built"] = _objects(build_dir) > before
    return out


def _set_seed(torch, seed: int) -> None:
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed(seed)


def _to(torch, x, device: str):
    if not isinstance(x, torch.Tensor):
        return x
    return (x.float() if x.is_floating_point() else x).to(device)


def _sync(torch, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def time_calls(torch, fn, args: list, warmup: int, calls: int, device: str, l2_flush_mb: int) -> list[float]:
    """KernelBench's ``time_execution_with_cuda_event`` (ms per call); host clock on CPU."""
    for _ in range(warmup):
        fn(*args)
        _sync(torch, device)
    out = []
    cuda = device.startswith("cuda")
    for _ in range(calls):
        _sync(torch, device)
        if cuda:
            flush = torch.empty(l2_flush_mb * 2**20 // 8, dtype=torch.int64, device=device)
            flush.fill_(42)
            del flush
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn(*args)
            e.record()
            torch.cuda.synchronize(device)
            out.append(s.elapsed_time(e))
        else:
            t0 = time.perf_counter()
            fn(*args)
            out.append((time.perf_counter() - t0) * 1e3)
    return out


def eval_one(ref_src: str, cand_src: str, build_dir: str, device: str, trials: int = 5, warmup: int = 3,
             calls: int = 100, l2_flush_mb: int = 256, seed: int = 42, time_reference: bool = True) -> dict:
    """``eval_kernel_against_ref`` with measure_performance, in this process. Returns compiled,
    correct, runtime_ms (mean), ref_runtime_ms and where the time went (seconds)."""
    import torch

    t0 = time.perf_counter()
    ph: dict[str, float] = {}
    res: dict = {"compiled": False, "correct": False, "phases_s": ph}
    context: dict = {}
    try:
        exec(compile(ref_src, "<string>", "exec"), context)
        Model, get_init_inputs, get_inputs = context["Model"], context["get_init_inputs"], context["get_inputs"]
        _set_seed(torch, seed)
        init = [_to(torch, x, device) for x in get_init_inputs()]
        with torch.no_grad():
            _set_seed(torch, seed)
            ref = Model(*init)
        t1 = time.perf_counter()
        try:
            os.environ["TORCH_USE_CUDA_DSA"] = "1"
            exec(compile(_build_dir_prefix(build_dir) + cand_src, "<string>", "exec"), context)
            ModelNew = context.get("ModelNew")
            _sync(torch, device)
        except Exception as e:  # noqa: BLE001 - KernelBench: a compilation failure
            res["error"] = f"compile: {type(e).__name__}: {str(e)[-300:]}"
            return res
        finally:
            ph["load"] = time.perf_counter() - t1
        if ModelNew is None:
            res["error"] = "compile: no ModelNew"
            return res
        res["compiled"] = True
        t1 = time.perf_counter()
        try:
            with torch.no_grad():
                _set_seed(torch, seed)
                new = ModelNew(*init)
                ref, new = ref.to(device), new.to(device)
                _sync(torch, device)
        except Exception as e:  # noqa: BLE001 - KernelBench: compiled but cannot run
            res["error"] = f"construct: {type(e).__name__}: {str(e)[-300:]}"
            return res
        finally:
            ph["construct"] = time.perf_counter() - t1
        t1 = time.perf_counter()
        ok = _trials(torch, ref, new, get_inputs, trials, seed, device, res)
        ph["trials"] = time.perf_counter() - t1
        res["correct"] = ok
        if ok:
            _set_seed(torch, seed)
            xs = [_to(torch, x, device) for x in get_inputs()]
            t1 = time.perf_counter()
            with torch.no_grad():
                ts = time_calls(torch, new, xs, warmup, calls, device, l2_flush_mb)
            ph["time"] = time.perf_counter() - t1
            res["runtime_ms"], res["runtime_all_ms"] = statistics.mean(ts), ts
            if time_reference:
                t1 = time.perf_counter()
                with torch.no_grad():
                    rs = time_calls(torch, ref, xs, warmup, calls, device, l2_flush_mb)
                ph["ref_time"] = time.perf_counter() - t1
                res["ref_runtime_ms"] = statistics.mean(rs)
    except Exception as e:  # noqa: BLE001 - KernelBench's last-level catch
        res["error"] = f"{type(e).__name__}: {str(e)[-300:]}"
        res["traceback"] = traceback.format_exc(limit=3)
    finally:
        context.clear()
        if device.startswith("cuda"):
            with contextlib.suppress(Exception):
                torch.cuda.empty_cache()
                torch.cuda.synchronize(device)
        ph["total"] = time.perf_counter() - t0
    return res


def _trials(torch, ref, new, get_inputs, n: int, seed: int, device: str, res: dict) -> bool:
    """``run_and_check_correctness``: every trial must pass; the first failure ends it."""
    torch.manual_seed(seed)
    seeds = [torch.randint(0, 2**32 - 1, (1,)).item() for _ in range(n)]
    passed = 0
    with torch.no_grad():
        for s in seeds:
            _set_seed(torch, s)
            xs = [_to(torch, x, device) for x in get_inputs()]
            out = ref(*xs)
            _sync(torch, device)
            try:
                got = new(*xs)
                _sync(torch, device)
            except Exception as e:  # noqa: BLE001 - a runtime error fails correctness
                res["error"] = f"runtime: {type(e).__name__}: {str(e)[-300:]}"
                return False
            outs, gots = (out, got) if isinstance(out, tuple | list) else ((out,), (got,))
            if len(outs) != len(gots) or any(a.shape != b.shape for a, b in zip(outs, gots, strict=False)):
                res["error"] = "output shape mismatch"
                return False
            if all(torch.allclose(a, b, atol=TOL, rtol=TOL) for a, b in zip(outs, gots, strict=True)):
                passed += 1
            else:
                res.setdefault("error", "output mismatch")
    return passed == n


def _eval_isolated(args: tuple) -> dict:
    return eval_one(*args[:4], **args[4])


def run(work: list[tuple[str, str]], build_root: str, device: str, workers: int, env: dict,
        trials: int = 5, warmup: int = 3, calls: int | list[int] = 100, l2_flush_mb: int = 256, seed: int = 42,
        time_reference: bool = True, isolate: bool = False, shared_build_dir: bool = False,
        deadline: float | None = None, log=None) -> dict:
    """The whole recipe over ``work`` = [(reference source, candidate source)], ``calls`` timed calls
    each (or per item, a list: the harness's count on that task). Returns per-candidate
    records (``pre`` and ``eval``) and the walls of both stages; with ``deadline`` (a
    ``time.perf_counter()`` value) the serial evaluation stops there (``n_eval`` says how far)."""
    log = log or (lambda m: None)
    dirs = [os.path.join(build_root, "shared" if shared_build_dir else f"sample_{i}") for i in range(len(work))]
    t0 = time.perf_counter()
    pre: list[dict | None] = [None] * len(work)
    with cf.ProcessPoolExecutor(max(1, workers), mp_context=mp.get_context("spawn")) as pool:
        futs = {pool.submit(precompile_one, src, d, env): i for i, ((_, src), d) in enumerate(zip(work, dirs, strict=True))}
        for n, f in enumerate(cf.as_completed(futs), 1):
            i = futs[f]
            pre[i] = f.result()
            log(f"[kb {time.perf_counter() - t0:6.1f}s] pre-compiled {n}/{len(work)}: compiled={pre[i]['compiled']} "
                f"build_s={pre[i]['build_s']:.1f}" + (f" ({pre[i]['error'][:120]})" if pre[i].get("error") else ""))
    t_pre = time.perf_counter() - t0
    os.environ.update(env)
    evals: list[dict] = []
    marks: list[tuple[float, float]] = []  # (start, end) per evaluation: the GPU is held throughout
    t1 = time.perf_counter()
    ctx = mp.get_context("spawn")
    for i, ((ref_src, src), d) in enumerate(zip(work, dirs, strict=True)):
        if evals and deadline is not None and time.perf_counter() > deadline:  # at least one: a rate
            log(f"[kb] deadline: evaluated {len(evals)} of {len(work)}")
            break
        s = time.perf_counter()
        kw = dict(trials=trials, warmup=warmup, calls=calls[i] if isinstance(calls, list) else calls, l2_flush_mb=l2_flush_mb, seed=seed,
                  time_reference=time_reference)
        if isolate:  # eval_from_generations: a fresh one-process pool per GPU batch
            with ctx.Pool(1) as p:
                r = p.apply(_eval_isolated, ((ref_src, src, d, device, kw),))
        else:
            r = eval_one(ref_src, src, d, device, **kw)
        marks.append((s, time.perf_counter()))
        evals.append(r)
        log(f"[kb {time.perf_counter() - t0:6.1f}s] evaluated {i + 1}/{len(work)}: compiled={r['compiled']} "
            f"correct={r['correct']} total={r['phases_s'].get('total', 0):.1f}s"
            + (f" ({r['error'][:160]})" if r.get("error") else ""))
    return {"pre": pre, "eval": evals, "pre_wall_s": t_pre, "eval_wall_s": time.perf_counter() - t1,
            "eval_marks": marks, "n": len(work), "n_eval": len(evals)}


def rate_per_min(rec: dict) -> float:
    """Candidates per minute of the recipe; a cut evaluation is charged its share of the
    pre-compile (both stages scale with the number of candidates)."""
    n, k = rec["n"], rec["n_eval"]
    if not k:
        return 0.0
    wall = rec["pre_wall_s"] * k / n + rec["eval_wall_s"]
    return k / wall * 60
