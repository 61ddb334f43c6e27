"""Harness throughput vs a KernelBench-style evaluator, with the harness's per-phase times.

    python bench/harness_throughput.py                     # GPU machine, fresh cache, ~4 min
    python bench/harness_throughput.py --device cpu        # C++ candidates, small sizes (CI box)

3 small-but-real tasks x --variants candidates (block size / unroll tag differ, so content
hashes differ; silu's CUDA source is torch-free, the others use torch in the .cu; 8 per task on
the GPU = 24) are each evaluated two ways: (b) by this harness (parallel cached builds, sandboxed
workers, fresh cache) and (a) by KernelBench's own batch recipe (`--baseline batch`, default):
build_compile_cache's parallel CPU pre-compile of every candidate with plain load_inline, as many
builds at once as the harness runs, then a serial in-process evaluation of each (5 trials, 3
warm-ups + 100 timed calls with L2 flush and events). `--baseline serial` is KernelBench's
single-sample loop instead (build and evaluate one at a time) on --baseline-n candidates. The
ratio compares candidates per minute. Progress lines go to stderr as candidates finish. Then:
where the harness's time went (median per phase), the median build_s of the harness's builds
(fast_build) vs the baseline's plain load_inline builds of the same candidates, and the
coefficient of variation of one candidate's runtime over --cv-reps evaluations.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import multiprocessing as mp
import os
import signal
import statistics
import sys
import tempfile
import time
import types
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from rewards.harness import Evaluator  # noqa: E402


@dataclass(frozen=True)
class BenchTask:
    id: str
    source: str
    small: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def hash(self) -> str:
        import hashlib

        return hashlib.sha256(self.source.encode()).hexdigest()[:16]


SIZES = {"cuda": {"N": 1 << 24, "B": 2048, "D": 2048, "R": 8192, "C": 1024},
         "cpu": {"N": 1 << 16, "B": 64, "D": 64, "R": 64, "C": 256}}

TASKS = {
    "silu": """import torch, torch.nn as nn
N = {N}
class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return x * torch.sigmoid(x)
def get_inputs():
    return [torch.randn(N)]
def get_init_inputs():
    return []
""",
    "linear_gelu": """import torch, torch.nn as nn
B, D = {B}, {D}
class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
    def forward(self, x):
        return torch.nn.functional.gelu(self.fc(x))
def get_inputs():
    return [torch.randn(B, D)]
def get_init_inputs():
    return [D]
""",
    "softmax": """import torch, torch.nn as nn
R, C = {R}, {C}
class Model(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return torch.softmax(x, dim=1)
def get_inputs():
    return [torch.randn(R, C)]
def get_init_inputs():
    return []
""",
}

MODELS = {
    "silu": ("", "ext.run(x)"), "softmax": ("", "ext.run(x)"),
    "linear_gelu": ("d", "ext.run(x, self.fc.weight, self.fc.bias)"),
}

HEAD = '''import torch, torch.nn as nn
from torch.utils.cpp_extension import load_inline
CPP = r"""
constexpr int BLOCK = {block};  // variant {tag}
{cpp}
"""
CUDA = r"""
#include <torch/extension.h>
constexpr int BLOCK = {block};  // variant {tag}
{cuda}
"""
ext = load_inline(name="{name}", cpp_sources=[CPP], cuda_sources=[CUDA] if {has_cuda} else None, functions=["run"])
class ModelNew(nn.Module):
    def __init__(self{init_sig}):
        super().__init__()
        {init_body}
    def forward(self, x):
        return {call}
'''

# GPU candidates: (C++ binding source, CUDA source). silu's CUDA is torch-free (raw pointers
# and a stream), which the fast build compiles without the torch headers.
CUDA_KERNELS = {
    "silu": (r"""#include <ATen/cuda/CUDAContext.h>
void silu_launch(const float* x, float* y, long n, cudaStream_t s);
torch::Tensor run(torch::Tensor x) {
    auto y = torch::empty_like(x);
    silu_launch(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), at::cuda::getCurrentCUDAStream());
    return y;
}""", r"""
__global__ void silu_kernel(const float* x, float* y, long n) {
    long i = (long)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) { float v = x[i]; y[i] = v / (1.0f + expf(-v)); }
}
void silu_launch(const float* x, float* y, long n, cudaStream_t s) {
    silu_kernel<<<(n + BLOCK - 1) / BLOCK, BLOCK, 0, s>>>(x, y, n);
}"""),
    "linear_gelu": ("torch::Tensor run(torch::Tensor x, torch::Tensor w, torch::Tensor b);", r"""
__global__ void gelu_kernel(float* y, long n) {
    long i = (long)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) { float v = y[i]; y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678f)); }
}
torch::Tensor run(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    auto y = at::addmm(b, x, w.t()); long n = y.numel();
    gelu_kernel<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(y.data_ptr<float>(), n);
    return y;
}"""),
    "softmax": ("torch::Tensor run(torch::Tensor x);", r"""
__global__ void softmax_kernel(const float* x, float* y, int cols) {
    __shared__ float red[BLOCK];
    const float* row = x + (long)blockIdx.x * cols; float* out = y + (long)blockIdx.x * cols;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < cols; j += BLOCK) m = fmaxf(m, row[j]);
    red[threadIdx.x] = m; __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) { if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]); __syncthreads(); }
    m = red[0]; __syncthreads();
    float sum = 0.f;
    for (int j = threadIdx.x; j < cols; j += BLOCK) sum += expf(row[j] - m);
    red[threadIdx.x] = sum; __syncthreads();
    for (int s = BLOCK / 2; s > 0; s >>= 1) { if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s]; __syncthreads(); }
    sum = red[0];
    for (int j = threadIdx.x; j < cols; j += BLOCK) out[j] = expf(row[j] - m) / sum;
}
torch::Tensor run(torch::Tensor x) {
    auto y = torch::empty_like(x);
    softmax_kernel<<<x.size(0), BLOCK>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.size(1));
    return y;
}"""),
}

# CPU candidates: plain C++ loops (BLOCK chunks silu's loop; the variants differ in hash).
CPU_KERNELS = {
    "silu": r"""#include <cmath>
torch::Tensor run(torch::Tensor x) {
    auto y = torch::empty_like(x); const float* p = x.data_ptr<float>(); float* q = y.data_ptr<float>();
    long n = x.numel();
    for (long s = 0; s < n; s += BLOCK)
        for (long i = s; i < std::min(n, s + BLOCK); ++i) q[i] = p[i] / (1.0f + std::exp(-p[i]));
    return y;
}""",
    "linear_gelu": r"""#include <cmath>
torch::Tensor run(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    auto y = at::addmm(b, x, w.t()).contiguous(); float* q = y.data_ptr<float>();
    for (long i = 0; i < y.numel(); ++i) q[i] = 0.5f * q[i] * (1.0f + std::erf(q[i] * 0.70710678f));
    return y;
}""",
    "softmax": r"""#include <cmath>
torch::Tensor run(torch::Tensor x) {
    x = x.contiguous(); auto y = torch::empty_like(x); long R = x.size(0), C = x.size(1);
    const float* p = x.data_ptr<float>(); float* q = y.data_ptr<float>();
    for (long r = 0; r < R; ++r) {
        float m = -INFINITY, s = 0.f;
        for (long j = 0; j < C; ++j) m = std::max(m, p[r * C + j]);
        for (long j = 0; j < C; ++j) s += std::exp(p[r * C + j] - m);
        for (long j = 0; j < C; ++j) q[r * C + j] = std::exp(p[r * C + j] - m) / s;
    }
    return y;
}""",
}


def candidate(tid: str, v: int, salt: str, device: str) -> str:
    block = (128, 256, 512, 1024)[v % 4]
    arg, call = MODELS[tid]
    if device == "cuda":
        cpp, cuda = CUDA_KERNELS[tid]
    else:
        cpp, cuda = CPU_KERNELS[tid], ""
    return HEAD.format(block=block, tag=f"{salt}-{v}", cpp=cpp, cuda=cuda, has_cuda=bool(cuda),
                       name=f"{tid}_v{v}_{salt}".replace("-", "_"), init_sig=f", {arg}" if arg else "",
                       init_body="self.fc = nn.Linear(d, d)" if arg else "pass", call=call)


def candidates(variants: int, salt: str, device: str) -> list[tuple[str, str]]:
    return [(tid, candidate(tid, v, salt, device)) for v in range(variants) for tid in TASKS]


def kb_build(cand_src: str, ext_dir: str) -> dict:
    """KernelBench's build_compile_cache step, on a CPU worker: import the candidate once so its
    load_inline compiles into the build directory the evaluation will load from."""
    os.environ["TORCH_EXTENSIONS_DIR"] = ext_dir
    t0 = time.perf_counter()
    try:
        exec(cand_src, types.ModuleType("cand").__dict__)
        return {"built": True, "build_s": time.perf_counter() - t0}
    except Exception as e:  # a compile error is a result, as in KernelBench
        return {"built": False, "build_s": time.perf_counter() - t0, "error": str(e)[-300:]}


def kernelbench_style(task_src: str, cand_src: str, device: str, trials=5, warmup=3, calls=100) -> dict:
    """What KernelBench's eval does: exec in this process, seed 42, allclose, events + L2 flush
    (host clock on CPU). Returns correctness and the in-process build (or cache load) time."""
    ref, cand = types.ModuleType("ref"), types.ModuleType("cand")
    exec(task_src, ref.__dict__)
    t0 = time.perf_counter()
    try:
        exec(cand_src, cand.__dict__)
    except Exception as e:
        return {"ok": False, "build_s": time.perf_counter() - t0, "error": str(e)[-300:]}
    build_s = time.perf_counter() - t0
    torch.manual_seed(42)
    init = ref.get_init_inputs()
    model = ref.Model(*init).to(device)
    torch.manual_seed(42)
    new = cand.ModelNew(*init).to(device)
    ok = True
    cuda = device == "cuda"
    with torch.no_grad():
        for t in range(trials):
            torch.manual_seed(t)
            xs = [x.to(device) for x in ref.get_inputs()]
            ok &= torch.allclose(model(*xs), new(*xs), atol=1e-4, rtol=1e-4)
        flush = torch.empty(64 * 2**20, device=device) if cuda else None
        for _ in range(warmup):
            new(*xs)
        for _ in range(calls):
            if cuda:
                flush.zero_()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                s.record()
                new(*xs)
                e.record()
                torch.cuda.synchronize()
                s.elapsed_time(e)
            else:
                new(*xs)
    return {"ok": bool(ok), "build_s": build_s}


EXEC_PHASES = ("start", "stage", "load", "trials", "time", "profile_start", "profile_load", "profile", "ncu")
SLOT_DETAIL = ("take", "trials_worker", "judge", "time_worker", "drop", "slot_held")


def phase_table(results) -> list[str]:
    keys = ["queue", "build", "ref_wait", "slot_wait", *EXEC_PHASES, *SLOT_DETAIL, "total"]
    rows = [f"{'phase (s)':<12}{'median':>9}{'max':>9}"]
    for k in keys:
        xs = [r.evidence.get("phases_s", {}).get(k) for r in results]
        xs = [x for x in xs if x is not None]
        if xs:
            rows.append(f"{k:<12}{statistics.median(xs):>9.2f}{max(xs):>9.2f}")
    return rows


def _interrupt(signum, frame):
    raise KeyboardInterrupt  # a timeout's SIGTERM: leave through the evaluator's cleanup


def main() -> None:
    signal.signal(signal.SIGTERM, _interrupt)
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--variants", type=int, default=None, help="candidates per task (cuda 8, cpu 1)")
    ap.add_argument("--baseline", choices=("batch", "serial"), default="batch",
                    help="KernelBench's batch recipe (parallel pre-compile, serial eval) on every "
                         "candidate, or its single-sample serial loop on --baseline-n of them")
    ap.add_argument("--baseline-n", type=int, default=None, help="serial baseline: candidates (cuda 2, cpu 1)")
    ap.add_argument("--cv-reps", type=int, default=5)
    ap.add_argument("--sandbox", choices=("best", "strict", "off"), default="best", help="harness.sandbox (its cost: best vs off)")
    ap.add_argument("--ncu", action="store_true", help="also run ncu on the top kernels (reference and each candidate)")
    ap.add_argument("--timed-calls", type=int, default=None, help="harness and baseline (cuda 100, cpu 20)")
    args = ap.parse_args()
    dev = args.device
    if dev == "cuda" and not torch.cuda.is_available():
        sys.exit("this benchmark needs a CUDA GPU; use --device cpu on a CPU machine")
    variants = args.variants or (8 if dev == "cuda" else 1)
    base_n = args.baseline_n if args.baseline_n is not None else (2 if dev == "cuda" else 1)
    calls = args.timed_calls or (100 if dev == "cuda" else 20)
    salt = str(int(time.time()))
    cands = candidates(variants, salt, dev)
    tasks = {tid: BenchTask(tid, src.replace("{N}", str(SIZES[dev]["N"])).format(**SIZES[dev]))
             for tid, src in TASKS.items()}
    cache = tempfile.mkdtemp(prefix="km-bench-")
    # ncu per candidate (20-30 s of GPU each) is Verifier feedback, not reward: measured by
    # scripts/gpu_capture_profiles.sh; here it is on only with --ncu
    cfg = {"device": dev, "cache_dir": cache, "compile_baseline": False, "timed_calls": calls,
           "profiling": {"kernel": {"enabled": args.ncu}}, "sandbox": args.sandbox}
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731

    t0 = time.perf_counter()
    with Evaluator(cfg) as ev:
        log(f"[{time.perf_counter() - t0:6.1f}s] harness up: {ev.n_build} concurrent builds x "
            f"{ev.cfg.build_max_jobs} jobs, {os.cpu_count()} cores; {len(cands)} candidates submitted")
        futs = {ev.submit(tasks[tid], src): (i, tid) for i, (tid, src) in enumerate(cands)}
        results = [None] * len(cands)
        for n, f in enumerate(cf.as_completed(futs), 1):
            i, tid = futs[f]
            r = results[i] = f.result()
            ph = r.evidence.get("phases_s", {})
            log(f"[{time.perf_counter() - t0:6.1f}s] {n}/{len(cands)} {tid} v{i // len(TASKS)}: {r.status} "
                f"build_s={r.build_s} runtime_us={r.runtime_us and round(r.runtime_us, 1)} "
                f"fast={r.evidence.get('fast_build')} phases={ph}" + (f" error={r.error}" if r.error else ""))
        t_h = time.perf_counter() - t0
        gpu = torch.cuda.get_device_name(0) if dev == "cuda" else "none (cpu mode)"
        print(f"device {dev}, GPU {gpu}, torch {torch.__version__}, {os.cpu_count()} cores, fresh cache", flush=True)
        report_harness(results, t_h, ev.task_timings)

        # the baseline builds fresh copies (its own salt: no shared build products)
        kb_src = [(tid, src.replace(salt, salt + "kb")) for tid, src in cands]
        if args.baseline == "serial":
            kb_src = [kb_src[i] for i in (0, 1, 2)][:base_n]  # silu, linear_gelu, softmax v0
        ext_dir = tempfile.mkdtemp(prefix="km-bench-kb-")
        os.environ["TORCH_EXTENSIONS_DIR"] = ext_dir
        t1 = time.perf_counter()
        pre = [None] * len(kb_src)
        if args.baseline == "batch":  # the parallel CPU pre-compile, as many builds at once as the harness
            with cf.ProcessPoolExecutor(ev.n_build, mp_context=mp.get_context("spawn")) as pool:
                futs = {pool.submit(kb_build, src, ext_dir): i for i, (_, src) in enumerate(kb_src)}
                for n, f in enumerate(cf.as_completed(futs), 1):
                    pre[futs[f]] = f.result()
                    log(f"[kb {time.perf_counter() - t1:6.1f}s] pre-compiled {n}/{len(kb_src)}: {pre[futs[f]]}")
        kb = []
        for (tid, src), built in zip(kb_src, pre, strict=True):
            kb.append(kernelbench_style(tasks[tid].source, src, dev, calls=calls))
            if built:
                kb[-1].update(build_s=built["build_s"], load_s=kb[-1]["build_s"])
            log(f"[kb {time.perf_counter() - t1:6.1f}s] {tid}: ok={kb[-1]['ok']} build_s={kb[-1]['build_s']:.1f}")
        t_b = time.perf_counter() - t1
        rate_h, rate_b = len(cands) / t_h * 60, len(kb) / t_b * 60
        print(f"{'kernelbench-' + args.baseline:<22}{len(kb):>11}{sum(k['ok'] for k in kb):>9}{t_b:>9.1f}{rate_b:>10.2f}")
        print(f"throughput ratio (harness / kernelbench-{args.baseline}): {rate_h / rate_b:.2f}x", flush=True)
        on = [r.build_s for r in results if r.build_s and not r.cache_hit]
        off = [k["build_s"] for k in kb if k.get("build_s")]
        if on and off:
            print(f"build_s, same candidates: harness (fast_build) median {statistics.median(on):.1f} (n={len(on)}, "
                  f"{ev.n_build} at once) vs plain load_inline median {statistics.median(off):.1f} (n={len(off)}, "
                  f"{ev.n_build if args.baseline == 'batch' else 1} at once): ratio "
                  f"{statistics.median(off) / statistics.median(on):.2f}x", flush=True)

        one = cands[0]
        reps = [ev.submit(tasks[one[0]], one[1]).result() for _ in range(args.cv_reps)]
    rts = [r.runtime_us for r in reps if r.runtime_us]
    cv = statistics.pstdev(rts) / statistics.mean(rts) if len(rts) > 1 else float("nan")
    print(f"runtime CV over {len(rts)} evaluations of {one[0]} v0: {cv:.3%} (runtimes us: {[round(x, 1) for x in rts]})")


def report_harness(results, t_h: float, timings: list[dict]) -> None:
    ok_h = sum(r.correct for r in results)
    builds = [r.build_s for r in results if r.build_s is not None and not r.cache_hit]
    bad = [(r.status, r.error) for r in results if not r.correct][:3]
    held = sum(r.evidence.get("phases_s", {}).get("slot_held", 0.0) for r in results)
    print(f"{'evaluator':<22}{'candidates':>11}{'correct':>9}{'wall s':>9}{'cand/min':>10}")
    print(f"{'kernelmine harness':<22}{len(results):>11}{ok_h:>9}{t_h:>9.1f}{len(results) / t_h * 60:>10.2f}")
    print(f"  median build_s (fresh builds, concurrent): "
          f"{statistics.median(builds) if builds else float('nan'):.1f} (n={len(builds)}); failures: {bad}")
    print(f"  execution slot busy: {held:.1f} s of {t_h:.1f} s wall ({held / t_h:.0%})")
    print("  where the time went, per candidate:")
    print("\n".join("    " + row for row in phase_table(results)))
    print("  reference per task (prepare / baseline s): "
          + ", ".join(f"{t['task']} {t['prepare_s']:.1f}/{t['baseline_s']:.1f}" for t in timings), flush=True)

if __name__ == "__main__":
    main()
