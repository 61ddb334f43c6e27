"""Worker process entry: ``python -m rewards.harness.worker <role> <fd>``.

Roles: ``build`` (import the candidate and construct its model on the CPU, so its
load_inline/load calls, module-level or at construction, build into the cache; never runs the
model), ``candidate`` (one candidate: load, trials, timing, profile; then the
process is discarded) and ``reference`` (reference outputs and baselines; never loads
candidate code, so its timings come from a clean process).
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import time
import traceback
import types
from multiprocessing.connection import Connection

from rewards.harness.sandbox import enter_network_namespace

# the sandbox's launcher entered it before dropping root (isolation.py)
NET = os.environ.get("KM_NET_DONE") or (enter_network_namespace() if os.environ.get("KM_NETNS") == "1" else "network namespace off")

import torch  # noqa: E402  (after unshare: nothing has opened sockets yet)

from rewards.harness import buildcache, construct, kernels, precision, protocol, threads, timing  # noqa: E402
from rewards.harness.reference import load_module, meta_device, shared_names  # noqa: E402

precision.apply_from_env()  # before any task code: the oracle's math (conf harness.precision)
HARNESS_FLAGS = precision.flags()  # what the harness set; a candidate's changes are diffed against it

_CUDA_FAULT = __import__("re").compile(r"illegal memory access|misaligned address|device-side assert|unspecified launch failure|illegal instruction|CUDA error", __import__("re").I)


def _err(e: BaseException) -> str:
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    return f"{type(e).__name__}: {lines[0] if lines else ''}"[:500]


def _exec_candidate(source: str, job: dict | None = None) -> types.ModuleType:
    """The candidate as module ``candidate``; with ``job["shared_namespace"]`` its namespace starts
    as a fresh load of the reference's (same size overrides), as in KernelBench's one exec dict."""
    mod = types.ModuleType("candidate")
    mod.__file__ = os.path.join(os.getcwd(), "candidate.py")
    with open(mod.__file__, "w") as f:
        f.write(source)
    if job and job.get("shared_namespace") and job.get("task_source"):
        try:
            mod.__dict__.update(shared_names(job["task_source"], job.get("overrides")))
        except Exception:  # noqa: BLE001 - a build worker (no GPU) may fail to load what the runtime can;
            if job.get("op") != "build":  # the build still compiles the candidate's extensions
                raise
    sys.modules["candidate"] = mod
    exec(compile(source, mod.__file__, "exec"), mod.__dict__)
    return mod


def _build_summary() -> dict:
    recs = buildcache.RECORDS
    ok = [r for r in recs if not r["failed"]]
    return {"builds": len(recs), "build_s": sum(r["build_s"] for r in recs),
            "fast_build": sorted({r[k] for r in recs for k in ("fast_build", "light_binding") if r.get(k)}),
            "cache_hit": bool(ok) and buildcache.compiles() == 0,
            "compiles": buildcache.compiles(), "compile_s": sum(r["build_s"] for r in recs if r["compiled"]),
            "failed_builds": sum(1 for r in recs if r["failed"] and not r["rewrite"]),
            "cuda_sources": [s for r in ok for s in r["cuda_sources"]], "entries": buildcache.entries()}


def _failure(e: BaseException, s: dict) -> dict:
    return {**s, "ok": False, "error": _err(e), "message": str(e)[-6000:],
            "trace": "".join(traceback.format_exception(e))[-3000:]}


def do_build(job: dict) -> dict:
    """Exec the candidate (module-level builds), then construct its model (builds in __init__,
    helpers, try: blocks; see construct.py); every build lands in the cache."""
    buildcache.install(job["cache_root"], job["fast_build"])
    try:
        mod = _exec_candidate(job["source"], job)
    except Exception as e:  # noqa: BLE001
        failed_in_build = (construct.build_failure(e) is not None or isinstance(e, SyntaxError)
                           or "load_inline" in "".join(traceback.format_tb(e.__traceback__)))
        if failed_in_build:
            return _failure(e, _build_summary())
        # errors after every build succeeded belong to the runtime (e.g. module-level CUDA use)
        return {**_build_summary(), "ok": True, "error": _err(e), "message": str(e)[-6000:],
                "trace": traceback.format_exc()[-3000:], "construct": "skipped: the module raised"}
    out = {"ok": True, "error": None, "has_model_new": hasattr(mod, "ModelNew")}
    cfg = job.get("construct") or {}
    if not (cfg.get("enabled") and out["has_model_new"] and job.get("task_source")):
        return {**_build_summary(), **out, "construct": "skipped: off, no ModelNew or no task"}
    c = construct.run(mod, job, cfg, lambda: load_module(job["task_source"], job.get("overrides"), name="reference"))
    failed = c.pop("build_failure", None)
    if failed is not None:
        return {**_failure(failed, _build_summary()), **c}
    return {**_build_summary(), **out, **c}


def _devcopy(xs, device):
    return timing.to_device(xs, device)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _storage_range(t: torch.Tensor) -> tuple[int, int]:
    st = t.untyped_storage()
    return st.data_ptr(), st.data_ptr() + st.nbytes()


def _aliases(outs: list, ins: list) -> bool:
    rs = [_storage_range(x) for x in ins if isinstance(x, torch.Tensor) and x.numel()]
    for o in outs:
        if isinstance(o, torch.Tensor) and o.numel() and type(o) is torch.Tensor and o.layout == torch.strided:
            a, b = _storage_range(o)
            if any(a < d and c < b for c, d in rs):
                return True
    return False


def _non_dense(outs: list) -> str | None:
    for o in outs:
        if type(o) is not torch.Tensor:
            return type(o).__module__ + "." + type(o).__qualname__
        if o.layout != torch.strided or o.is_sparse or o.is_meta or o.is_nested:
            return f"torch.Tensor(layout={o.layout})"
    return None


@contextlib.contextmanager
def eval_mode(model):
    """The model in eval mode for the block, then each module's as-constructed ``training`` flag
    back (``both``: the eval trials must not change the modes the training trials see)."""
    flags = [(m, m.training) for m in model.modules()] if isinstance(model, torch.nn.Module) else []
    if flags:
        model.eval()
    try:
        yield
    finally:
        for m, t in flags:
            m.training = t


def precision_evidence() -> dict:
    """Torch's precision flags now, and which of them differ from what the harness set."""
    f = precision.flags()
    return {"precision_flags": f, "precision_flags_changed": precision.changed(HARNESS_FLAGS, f)}


def set_mode(model, mode: str):
    """``eval``: .eval(); ``train``: the model as constructed, as KernelBench runs it (no .train():
    a program that calls self.eval() in __init__ stays in eval mode, as it does there)."""
    if mode == "eval" and isinstance(model, torch.nn.Module):
        model.eval()
    return model


class Candidate:
    def __init__(self, job: dict):
        self.device = job["device"]
        self.seed, self.mode = job["seed"], job.get("model_mode", "train")
        buildcache.install(job["cache_root"], job["fast_build"], serve_failures=True)
        self.threads0 = threads.ids()
        mod = _exec_candidate(job["source"], job)
        self.file = mod.__file__
        if not hasattr(mod, "ModelNew"):
            raise LookupError("the candidate defines no `ModelNew`")
        ref = load_module(job["task_source"], job["overrides"], name="reference")
        torch.manual_seed(job["seed"])
        init = ref.get_init_inputs()
        ref_model = None
        if job["copy_params"]:
            torch.manual_seed(job["seed"])
            ref_model = ref.Model(*init)
        torch.manual_seed(job["seed"])
        self.model = mod.ModelNew(*init)
        if ref_model is not None:
            own = dict(self.model.named_parameters())
            with torch.no_grad():
                for n, p in ref_model.named_parameters():
                    if n in own and own[n].shape == p.shape:
                        own[n].copy_(p)
        if isinstance(self.model, torch.nn.Module):
            self.model = self.model.to(self.device)
        set_mode(self.model, self.mode)
        if self.device == "cuda":  # nothing of the load left running on the GPU when it answers:
            torch.cuda.synchronize()  # a resident candidate's work must not reach a timed section
        self.build = _build_summary()

    def trials(self, sets: list, seeds: list | None = None, modes: list | None = None) -> dict:
        """{mode: per-trial results}; under ``both`` the eval trials run first, then the model's
        as-constructed modes come back for the training-mode trials."""
        out = {}
        for mode in modes or ["train"]:
            switch = self.mode == "both" and mode == "eval"
            with eval_mode(self.model) if switch else contextlib.nullcontext():
                out[mode] = self._trials(sets, seeds)
        return out

    def _trials(self, sets: list, seeds: list | None) -> list:
        res = []
        for k, xs in enumerate(sets):
            dx = _devcopy(xs, self.device)
            before = [x.clone() if isinstance(x, torch.Tensor) else x for x in dx]
            if seeds:  # as the reference process did before the same forward (dropout, RNG ops)
                torch.manual_seed(seeds[k])
            with torch.no_grad():
                outs = timing.flatten(self.model(*dx))
            if self.device == "cuda":
                torch.cuda.synchronize()
            mutated = any(isinstance(a, torch.Tensor) and not (a.shape == b.shape and torch.equal(a, b))
                          for a, b in zip(dx, before, strict=True))
            nd = _non_dense(outs)
            res.append({"aliased": _aliases(outs, dx), "mutated": mutated, "non_dense": nd,
                        "outputs": [] if nd else [o.detach().to("cpu", copy=True) for o in outs]})
        return res

    def time(self, job: dict) -> dict:
        sets = [_devcopy(xs, self.device) for xs in job["sets"]]
        plan = job["plan"]
        seeds = {i: timing.spot_seed(self.seed, p) for i, p in plan["spot"].items()}
        r = timing.time_calls(self.model, sets, self.device, len(plan["warmup"]), job["calls"],
                              job["l2_flush_mb"], set(plan["spot"]), plan, seeds)
        r.update(threads.started(self.threads0, self.file))
        r.update(precision_evidence())  # after the candidate loaded and ran
        return r

    def warm(self, job: dict) -> dict:
        """One forward on the profiled inputs before the profiled run (``harness.profile_warm_early``):
        lazy initialisation and autotuning happen here, outside the GPU lock."""
        with torch.no_grad():
            self.model(*_devcopy(job["sets"][0], self.device))
        if self.device == "cuda":
            torch.cuda.synchronize()
        return {}

    def profile(self, job: dict) -> dict:
        """The profiled run. ``defer``: only the run (the part that must be alone on the GPU);
        the ``profile_summary`` op that follows writes and reads the trace, after the lock."""
        declared = kernels.declared_kernels(self.build["cuda_sources"])
        rec = profile_record(self.model, _devcopy(job["sets"][0], self.device), job["calls"], job.get("system"),
                             job.get("warm", True))
        if job.get("defer"):
            self.deferred = (rec, declared, job["calls"], job.get("system"))
            return {"deferred": True}
        return profile_summary(rec, declared, job["calls"], job.get("system"))

    def profile_summary(self) -> dict:
        deferred, self.deferred = getattr(self, "deferred", None), None
        if deferred is None:
            raise RuntimeError("profile_summary without a deferred profile op before it")
        return profile_summary(*deferred)


def reference_model(job: dict):
    """The task's reference module and its ``Model`` as every reference process builds it: init
    inputs and construction under ``job["seed"]``, on ``job["device"]``, in ``job["model_mode"]``
    (the reference worker and the profiler worker then hold the same parameters)."""
    ref = load_module(job["task_source"], job["overrides"], name="reference")
    torch.manual_seed(job["seed"])
    init = ref.get_init_inputs()
    torch.manual_seed(job["seed"])
    model = ref.Model(*init)
    model = model.to(job["device"]) if isinstance(model, torch.nn.Module) else model
    set_mode(model, job.get("model_mode", "train"))
    return ref, model


class ReferenceRun(Candidate):
    """The reference model in a profiler worker, for its profiled run only (``warm``, ``profile``,
    ``profile_summary``): built as the reference worker builds it, from the task's source alone.
    Profiling it here keeps CUPTI out of the reference worker, whose next task is timed there."""

    def __init__(self, job: dict):
        self.device = job["device"]
        _, self.model = reference_model(job)
        if self.device == "cuda":
            torch.cuda.synchronize()
        self.build = {"cuda_sources": []}


def profile_model(model, xs: list, calls: int, declared: list[str], system: dict | None = None) -> dict:
    return profile_summary(profile_record(model, xs, calls, system), declared, calls, system)


def profile_record(model, xs: list, calls: int, system: dict | None = None, warm: bool = True) -> dict:
    """The profiled forwards on the GPU, the profiler stopped; nothing written or parsed yet.
    ``warm``: one forward first (False: the ``warm`` op ran it already, outside the lock)."""
    from rewards.harness import sysprof

    if system:  # the same run, plus module ranges and shapes for the system-level profile
        return sysprof.record(model, xs, calls, system.get("record_shapes", True), warm)
    with torch.no_grad():
        if warm:
            model(*xs)
        torch.cuda.synchronize()
        with sysprof.session() as prof:
            kernels.bracketed_calls(model, xs, calls)
    return {"prof": prof}


def profile_summary(rec: dict, declared: list[str], calls: int, system: dict | None = None) -> dict:
    """``profile_record``'s trace written, read and summarized (host work)."""
    if system:
        from rewards.harness import sysprof

        cap = sysprof.export(rec)
        out = kernels.summarize_trace(cap["trace_path"], declared, calls)
        out["declared_kernels"] = declared
        out["system_profile"] = sysprof.summarize(cap["events"], calls, cap["modules"], declared, **system["summary"])
        out["system_profile"]["profile_s"] = cap["capture_s"]
        if system.get("keep_events"):
            out["system_events"] = {"events": cap["events"], "modules": cap["modules"], "calls": calls}
        return out
    path = os.path.join(os.getcwd(), "trace.json")
    rec["prof"].export_chrome_trace(path)
    out = kernels.summarize_trace(path, declared, calls)
    out["declared_kernels"] = declared
    return out


class Reference:
    """Reference model per (task, overrides): inputs, outputs, FLOPs, bytes and baselines."""

    @staticmethod
    def size(job: dict) -> dict:
        """Bytes of one forward's inputs and outputs, from a pass on the meta device (nothing is
        allocated): the orchestrator admits the task's context to host memory by it (hostmem.py)."""
        ref = load_module(job["task_source"], job["overrides"], name="reference")
        with meta_device(), torch.no_grad():
            xs = ref.get_inputs()
            outs = timing.flatten(ref.Model(*ref.get_init_inputs())(*xs))
        return {"in_bytes": protocol.tensor_bytes(xs), "out_bytes": protocol.tensor_bytes(outs)}

    def prepare(self, job: dict) -> dict:
        dev, mode = job["device"], job.get("model_mode", "train")
        marks = [("start", time.perf_counter())]  # where a slow prepare spends its time (task_timings)
        ref, model = reference_model(job)
        self.model, self.device = model, dev
        marks.append(("construct", time.perf_counter()))

        forwards: list[float] = []  # each forward's wall (synced): the fastest sizes the timed calls

        def run(seed):
            torch.manual_seed(seed)
            xs = [x.cpu() if isinstance(x, torch.Tensor) else x for x in ref.get_inputs()]
            torch.manual_seed(seed)  # the candidate worker seeds the same before its forward
            xd = _devcopy(xs, dev)
            _sync(dev)
            t0 = time.perf_counter()
            with torch.no_grad():
                outs = timing.flatten(model(*xd))
            _sync(dev)
            forwards.append((time.perf_counter() - t0) * 1e6)
            return xs, [o.detach().cpu() for o in outs]

        trials_eval = None
        if mode == "both":  # eval first, as the candidate worker runs them (running stats untouched)
            with eval_mode(model):
                trials_eval = [run(s)[1] for s in job["trial_seeds"]]
        trials = [run(s) for s in job["trial_seeds"]]
        marks.append(("trials", time.perf_counter()))
        sets = [run(s) for s in job["set_seeds"]]
        self.sets = [_devcopy(xs, dev) for xs, _ in sets]
        spot = []  # outputs for the (set, factor) pairs that timed calls are spot-checked on
        for p, (s, f) in enumerate(job.get("spot_pairs", [])):
            torch.manual_seed(timing.spot_seed(job["seed"], p))
            with torch.no_grad():
                outs = timing.flatten(model(*[timing.scaled(x, f) for x in self.sets[s]]))
            spot.append([o.detach().cpu() for o in outs])
        marks.append(("sets_spot", time.perf_counter()))
        from torch.utils.flop_counter import FlopCounterMode

        with torch.no_grad(), FlopCounterMode(display=False) as fc:
            outs = timing.flatten(model(*self.sets[0]))
        params = list(model.parameters()) + list(model.buffers())
        dtype = str(params[0].dtype if params else outs[0].dtype).replace("torch.", "")
        marks.append(("flops", time.perf_counter()))
        phases = {k: round(t - marks[i][1], 3) for i, (k, t) in enumerate(marks[1:])}
        return {"phases": phases, "trials": trials, "trials_eval": trials_eval, "sets": sets, "spot": spot,
                "forward_us": min(forwards),
                "ref_flops": float(fc.get_total_flops()),
                "ref_bytes": float(protocol.tensor_bytes([self.sets[0], params, outs])), "dtype": dtype}

    def compile(self, job: dict) -> dict:
        """torch.compile and warm up (this is where compilation happens), before timing."""
        try:
            self.compiled = torch.compile(self.model)
            with torch.no_grad():
                for i in range(max(1, job["warmup"])):
                    self.compiled(*self.sets[i % len(self.sets)])
            if self.device == "cuda":
                torch.cuda.synchronize()
            return {"compile_error": None}
        except Exception as e:  # noqa: BLE001 - a baseline that cannot be compiled is absent
            self.compiled = None
            return {"compile_error": _err(e)}

    def baseline(self, job: dict) -> dict:
        t = lambda fn: timing.time_calls(fn, self.sets, self.device, job["warmup"], job["calls"],  # noqa: E731
                                         job["l2_flush_mb"], plan=job.get("plan"))
        r = t(self.model)
        key = "event_us" if self.device == "cuda" else "wall_us"
        out = {"ref_runtime_us": timing.stats(r[key])["median"], "ref_compile_runtime_us": None}
        if getattr(self, "compiled", None) is not None:
            try:
                out["ref_compile_runtime_us"] = timing.stats(t(self.compiled)[key])["median"]
            except Exception as e:  # noqa: BLE001
                out["compile_error"] = _err(e)
        if self.device == "cuda" and job.get("profile"):
            try:
                p = profile_model(self.model, self.sets[0], job.get("profile_calls", 1), [], job.get("system"))
            except Exception as e:  # noqa: BLE001 - the harness's instrumentation, not the task, failed
                out["ref_profiling_error"] = f"profiling the reference failed ({_err(e)})"
                return out
            out["ref_kernels"] = [{k: v for k, v in d.items() if k != "origin"} for d in p["kernels"]]
            for k in ("system_profile", "system_events"):
                if k in p:
                    out["ref_" + k] = p[k]
        return out


def _warm_flop_counter() -> None:
    """FlopCounterMode's first use in a process imports torch._dynamo, torch._inductor and triton:
    7.2 s of each reference's preparation on the H200 beside 8 builds (a GPU run renews the
    reference worker after every task). A fresh worker pays it while it waits for its task."""
    with contextlib.suppress(Exception):
        from torch.utils.flop_counter import FlopCounterMode

        with torch.no_grad(), FlopCounterMode(display=False):
            torch.nn.Linear(2, 2)(torch.zeros(1, 2))


def _cupti_warm_up() -> dict:
    """CUPTI's start-up (sysprof.warm_up) in a worker that will profile: ``warm_up_s``, or
    ``warm_up_error`` when it cannot start. That must not kill the worker: the profile op then
    reports why."""
    from rewards.harness import sysprof

    try:
        return {"warm_up_s": sysprof.warm_up()}
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        return {"warm_up_error": _err(e)}


def _import_compiler() -> dict:
    """(harness.compiler_spares) What ``torch.compile(..., backend="inductor")`` imports when a
    process first calls it, before the candidate that calls it is loaded here (compilerspares.py).
    Harness code only: no candidate code has run in this process."""
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        import torch._dynamo  # noqa: F401
        import torch._inductor.compile_fx  # noqa: F401
    except Exception as e:  # noqa: BLE001 - the candidate imports it itself then
        traceback.print_exc()
        return {"error": _err(e)}
    return {"s": round(time.perf_counter() - t0, 3), "cpu_s": round(time.process_time() - c0, 3)}


def _free(state: dict, key: str) -> None:
    """Drop ``state[key]`` (a process kept across tasks): its model's GPU memory goes back to the
    device rather than staying in this process's cache beside the next task's."""
    if state.pop(key, None) is not None and torch.cuda.is_available():
        gc.collect()
        torch.cuda.empty_cache()


def main() -> None:
    role, fd = sys.argv[1], int(sys.argv[2])
    conn = Connection(fd)
    nice = int(os.environ.get("KM_NICE", "0"))
    if nice > 0:  # builds: the compilers ninja starts inherit it
        os.nice(nice)
    hello = {"role": role, "net": NET, "torch": str(torch.__version__), "cuda": torch.version.cuda,
             "pid": os.getpid(), "gpu": None, "capability": None}
    if os.environ.get("KM_DEVICE") == "cuda" and role != "build":
        hello["gpu"] = torch.cuda.get_device_name(0)
        hello["capability"] = "{}.{}".format(*torch.cuda.get_device_capability(0))
        torch.cuda.init()
        if role == "profiler":  # profiles one candidate after its timing, in a process of its own
            hello.update(_cupti_warm_up())
    # a reference spare warms before its hello: until then the slot stops it during timed sections,
    # and once taken it is ready; the evaluator's first reference warms after (its hello is awaited)
    warm_flops = role == "reference" and os.environ.get("KM_DEVICE") == "cuda"
    if warm_flops and os.environ.get("KM_SPARE") == "1":
        _warm_flop_counter()
    hello["cpu_s"] = time.process_time()  # start-up's CPU: imports, CUDA, CUPTI
    protocol.send(conn, hello)
    if warm_flops and os.environ.get("KM_SPARE") != "1":
        _warm_flop_counter()  # after the hello: nobody waits for it, the next task's prepare may
    state: dict = {}
    if os.environ.get("KM_IMPORT_COMPILER") == "1":  # after the hello: an idle spare is left running
        state["compiler_import"] = _import_compiler()
    while True:
        try:
            job = protocol.recv(conn)
        except EOFError:
            return
        op = job["op"]
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            if "staged" in job:  # inputs sent once per worker by a "stage" message
                job["sets"] = state["staged"][job.pop("staged")]
            if op == "stage":
                state["staged"], res = job["data"], {}
            elif op == "build":
                res = do_build(job)
            elif op == "load":
                state["cand"] = Candidate(job)
                res = {"build": state["cand"].build}
                if "compiler_import" in state:
                    res["compiler_import"] = state.pop("compiler_import")
            elif op == "load_reference":  # a profiler process kept for references: the last one's memory goes first
                _free(state, "cand")
                state["cand"], res = ReferenceRun(job), {}
            elif op == "unload":
                _free(state, "cand")
                res = {}
            elif op == "trials":
                res = {"trials": state["cand"].trials(job["sets"], job.get("seeds"), job.get("modes"))}
                res.update(precision_evidence())  # an incorrect candidate's flags are evidence too
            elif op == "time":
                res = state["cand"].time(job)
            elif op == "warm":
                res = state["cand"].warm(job)
            elif op == "cupti":  # harness.profile_worker same: CUPTI starts after the timing, never before
                res = _cupti_warm_up()
            elif op == "profile":
                res = state["cand"].profile(job)
            elif op == "profile_summary":
                res = state["cand"].profile_summary()
            elif op == "size":
                res = Reference.size(job)
            elif op == "prepare":  # a reference worker is kept across tasks
                _free(state, "ref")
                state["ref"] = Reference()
                res = state["ref"].prepare(job)
            elif op == "compile":
                res = state["ref"].compile(job)
            elif op == "baseline":
                res = state["ref"].baseline(job)
            else:
                res = {"exception": f"unknown op {op!r}"}
        except Exception as e:  # noqa: BLE001 - the parent classifies; the worker reports
            traceback.print_exc()
            res = {"exception": _err(e), "trace": traceback.format_exc()[-3000:]}
            if role in ("candidate", "profiler"):
                res["compiles"] = buildcache.compiles()
            if _CUDA_FAULT.search(str(e)):
                # the CUDA context is poisoned: report, then die so the slot gets a fresh worker
                protocol.send(conn, {**res, "fatal": True})
                os._exit(3)
        res["op_s"] = time.perf_counter() - t0
        res["op_cpu_s"] = time.process_time() - c0  # every thread's CPU: where a batch's host CPU goes
        # compiler runs in this process so far: in a candidate or profiler worker, builds the build
        # pool did not capture (evidence.slot_builds)
        if role in ("candidate", "profiler"):
            res["compiles"] = buildcache.compiles()
            res["compile_s"] = sum(r["build_s"] for r in buildcache.RECORDS if r["compiled"])
        sys.stdout.flush()
        protocol.send(conn, res)


if __name__ == "__main__":
    main()
