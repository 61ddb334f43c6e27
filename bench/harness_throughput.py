"""Harness throughput vs a KernelBench-style evaluator, on the GPU machine.

    python bench/harness_throughput.py [--baseline-n 3] [--variants 8]

24 distinct CUDA candidates (3 small-but-real tasks x 8 variants: block size and unroll tag
differ, so content hashes differ) are evaluated (b) by this harness (parallel cached builds,
sandboxed workers, fresh cache) and (a) by a KernelBench-style loop (in-process load_inline,
serial, 5 trials, 3 warm-ups + 100 timed calls with L2 flush and events). The serial baseline
takes about a minute per candidate, so it runs on --baseline-n (default 2) of them (its per-candidate
rate does not depend on how many); the ratio compares candidates per minute. Then one
candidate is evaluated 5 more times by the harness: the coefficient of variation of runtime.
"""

from __future__ import annotations

import argparse
import os
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


TASKS = {
    "silu": """import torch, torch.nn as nn
N = 1 << 24
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
B, D = 2048, 2048
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
R, C = 8192, 1024
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

HEAD = """import torch, torch.nn as nn
from torch.utils.cpp_extension import load_inline
CUDA = r'''
#include <torch/extension.h>
#define BLOCK {block}
// variant {tag}
{kernel}
'''
ext = load_inline(name="{name}", cpp_sources=["{decl}"], cuda_sources=[CUDA], functions=["run"])
"""

KERNELS = {
    "silu": ("torch::Tensor run(torch::Tensor x);", r"""
__global__ void silu_kernel(const float* x, float* y, long n) {
    long i = (long)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) { float v = x[i]; y[i] = v / (1.0f + expf(-v)); }
}
torch::Tensor run(torch::Tensor x) {
    auto y = torch::empty_like(x); long n = x.numel();
    silu_kernel<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}""", """class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return ext.run(x)
"""),
    "linear_gelu": ("torch::Tensor run(torch::Tensor x, torch::Tensor w, torch::Tensor b);", r"""
__global__ void gelu_kernel(float* y, long n) {
    long i = (long)blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) { float v = y[i]; y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678f)); }
}
torch::Tensor run(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
    auto y = at::addmm(b, x, w.t()); long n = y.numel();
    gelu_kernel<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(y.data_ptr<float>(), n);
    return y;
}""", """class ModelNew(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
    def forward(self, x):
        return ext.run(x, self.fc.weight, self.fc.bias)
"""),
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
}""", """class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x):
        return ext.run(x)
"""),
}


def candidates(variants: int, salt: str) -> list[tuple[str, str]]:
    out = []
    for tid, (decl, kernel, model) in KERNELS.items():
        for v in range(variants):
            block = (128, 256, 512, 1024)[v % 4]
            src = HEAD.format(block=block, tag=f"{salt}-{v}", kernel=kernel, name=f"{tid}_v{v}_{salt}", decl=decl)
            out.append((tid, src + model))
    return out


def kernelbench_style(task_src: str, cand_src: str, trials=5, warmup=3, calls=100) -> bool:
    """What KernelBench's eval does: exec in this process, seed 42, allclose, events + L2 flush."""
    ref, cand = types.ModuleType("ref"), types.ModuleType("cand")
    exec(task_src, ref.__dict__)
    exec(cand_src, cand.__dict__)
    torch.manual_seed(42)
    init = ref.get_init_inputs()
    model = ref.Model(*init).cuda()
    torch.manual_seed(42)
    new = cand.ModelNew(*init).cuda()
    ok = True
    with torch.no_grad():
        for t in range(trials):
            torch.manual_seed(t)
            xs = [x.cuda() for x in ref.get_inputs()]
            ok &= torch.allclose(model(*xs), new(*xs), atol=1e-4, rtol=1e-4)
        flush = torch.empty(64 * 2**20, device="cuda")
        for _ in range(warmup):
            new(*xs)
        times = []
        for _ in range(calls):
            flush.zero_()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            s.record()
            new(*xs)
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e))
    return bool(ok)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", type=int, default=8)
    ap.add_argument("--baseline-n", type=int, default=2)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("this benchmark needs a CUDA GPU")
    salt = str(int(time.time()))
    cands = candidates(args.variants, salt)
    tasks = {tid: BenchTask(tid, src) for tid, src in TASKS.items()}
    cache = tempfile.mkdtemp(prefix="km-bench-")
    cfg = {"device": "cuda", "cache_dir": cache, "compile_baseline": False}

    t0 = time.perf_counter()
    with Evaluator(cfg) as ev:
        futs = [ev.submit(tasks[tid], src) for tid, src in cands]
        results = []
        for i, f in enumerate(futs):  # progress on stderr, so a run cut short still says something
            r = f.result()
            results.append(r)
            print(f"[{time.perf_counter() - t0:6.1f}s] {i + 1}/{len(futs)} {cands[i][0]}: {r.status} "
                  f"build_s={r.build_s} runtime_us={r.runtime_us}", file=sys.stderr, flush=True)
        t_h = time.perf_counter() - t0
        one = cands[0]
        reps = [ev.submit(tasks[one[0]], one[1]).result() for _ in range(5)]
    ok_h = sum(r.correct for r in results)
    builds = [r.build_s for r in results if r.build_s is not None and not r.cache_hit]
    statuses = statistics.multimode([r.status for r in results])
    bad = [(r.status, r.error) for r in results if not r.correct][:3]

    os.environ["TORCH_EXTENSIONS_DIR"] = tempfile.mkdtemp(prefix="km-bench-kb-")
    picks = [cands[i * args.variants + 1] for i in range(len(KERNELS))][: args.baseline_n]
    print(f"harness: {len(cands)} candidates in {t_h:.1f} s ({len(cands) / t_h * 60:.2f}/min)", flush=True)
    t1 = time.perf_counter()
    ok_b = 0
    for tid, src in picks:
        ok_b += kernelbench_style(TASKS[tid], src.replace(salt, salt + "kb"))
        print(f"[kb {time.perf_counter() - t1:6.1f}s] {tid} done", file=sys.stderr, flush=True)
    t_b = time.perf_counter() - t1

    rate_h, rate_b = len(cands) / t_h * 60, len(picks) / t_b * 60
    rts = [r.runtime_us for r in reps if r.runtime_us]
    cv = statistics.pstdev(rts) / statistics.mean(rts) if len(rts) > 1 else float("nan")
    print(f"\nGPU {torch.cuda.get_device_name(0)}, torch {torch.__version__}, {os.cpu_count()} cores")
    print(f"{'evaluator':<22}{'candidates':>11}{'correct':>9}{'wall s':>9}{'cand/min':>10}")
    print(f"{'kernelbench-style':<22}{len(picks):>11}{ok_b:>9}{t_b:>9.1f}{rate_b:>10.2f}")
    print(f"{'kernelmine harness':<22}{len(cands):>11}{ok_h:>9}{t_h:>9.1f}{rate_h:>10.2f}")
    print(f"throughput ratio (harness / kernelbench-style): {rate_h / rate_b:.2f}x")
    print(f"median build_s (harness, fresh builds): {statistics.median(builds) if builds else float('nan'):.1f}"
          f"  (n={len(builds)}); statuses: {statuses}; failures: {bad}")
    print(f"runtime CV over 5 evaluations of {one[0]} v0: {cv:.3%} (runtimes us: {[round(x, 1) for x in rts]})")


if __name__ == "__main__":
    main()
