"""HarnessConfig: the typed form of conf/harness/*.yaml; unknown keys fail with one sentence."""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import Any

MODEL_MODES = ("train", "eval", "both")


def _d(**kw: Any) -> Any:
    return field(default_factory=lambda: dict(kw))


@dataclass
class HarnessConfig:
    device: str = "auto"
    shrink: Any = "auto"
    trials: int = 5
    seed: int = 42
    copy_params: bool = False
    model_mode: str = "train"  # train (KernelBench: never .eval()) | eval | both (correct in both modes)
    shared_namespace: bool = True  # the candidate sees the reference module's names (KernelBench's exec)
    precision: dict = _d(matmul_tf32=False, cudnn_tf32=False)  # TF32 in the workers (the oracle's math)
    atol: dict = _d(float32=1e-4, float16=1e-2, bfloat16=1e-2)
    rtol: dict = _d(float32=1e-4, float16=1e-2, bfloat16=1e-2)
    warmup: int = 3
    timed_calls: int = 100  # the most timed calls of one measurement (KernelBench's 100)
    timing_budget_ms: float = 300.0  # per task: calls = this much of the reference's forward time, in tens; 0: timed_calls
    min_timed_calls: int = 20  # the fewest timed calls a budget leaves (the median's sample)
    input_sets: int = 3
    l2_flush_mb: int = 256
    spot_checks: int = 3
    timing_input_scaling: bool = True
    timing_scale_range: list = field(default_factory=lambda: [0.5, 1.0])
    timer_disagreement: float = 1.5
    timer_slack_us: float = 50.0
    timeouts_s: dict = _d(build=600, correctness=120, timing=300, baseline=600, start=120)
    build_workers: Any = "auto"
    build_order: str = "longest"  # longest: the build pool starts the build guessed longest first (buildorder.py) | fifo
    build_gather_s: float = 0.05  # (longest) a build starts once submits paused this long: a batch is ordered whole
    gpu_workers: Any = "auto"
    cpu_workers: int = 1
    resident: Any = "auto"  # candidates loaded per slot at once (GPU memory bound); auto: 6 on cuda, 2 on cpu
    host_memory_gb: Any = "auto"  # reference contexts + resident candidates' outputs on the host (hostmem.py); auto: 60% of RAM, 0: unlimited
    reference_spares: Any = "auto"  # warm reference processes kept per GPU; auto: one per reference worker where they are renewed (cuda + profile), else 0
    host_memory_patience_s: float = 30.0  # how long a waiter that does not fit may be passed by ones that do
    reference_workers: Any = "auto"  # auto: 4 on cuda, 2 on cpu; tasks whose references prepare in parallel (only their timing takes the GPU lock)
    profile_reference_apart: bool = True  # the reference's profiled run in a profiler worker: no CUPTI in the reference worker, which then times the next task without a restart
    reference_profilers: Any = "auto"  # references profiled apart at once, each in a profiler process kept across tasks (task code only); auto: one per reference worker; 0: on the reference's thread in a fresh one
    reference_lock_first: bool = True  # a reference waiting to time its baseline gets the GPU lock before waiting candidates
    candidates_wait_for_baseline: bool = False  # False: a candidate starts on its reference's outputs; the baseline is joined at the end
    timeline_entries: int = 4096  # Evaluator.timeline: the last GPU-lock sections and phases, for checks
    cache_dir: str = "~/.cache/kernelmine"
    cache_key_file: str = ""  # the caches' MAC key (cachemac.py); "" = <cache_dir>/.keys/cache_mac.key
    network_namespace: bool = True
    # isolation of processes that run candidate code (sandbox.Policy, README, "The sandbox")
    sandbox: str = "best"  # strict: refuse without every protection | best: what the machine allows | off
    sandbox_hide: list = field(default_factory=list)  # more paths workers must not see (store, checkpoints)
    sandbox_uids: list = field(default_factory=lambda: [2_000_000_000, 1_000_000])  # [first, count] of worker uids
    sandbox_ncu_uid: bool = True  # ncu under a worker uid where the driver allows users counters, else root in the view
    compile_baseline: bool = True
    baselines: bool = True
    profile: bool = True
    profile_calls: int = 3
    profile_warm_early: bool = True  # the profiled run's warming forward before the GPU lock, not inside it
    profiler_spares: Any = "auto"  # (profile_worker: fresh) warm profiler workers per GPU; auto: one per resident candidate (one warms in 4-8 s)
    profile_worker: str = "same"  # same: the timed worker profiles after its timing | fresh: a profiler process per candidate
    compiler_spares: bool = True  # a candidate calling torch.compile loads in a worker that imported dynamo/inductor beside its build (compilerspares.py)
    profiler_lazy_inductor: bool = True  # a profiler session starts without importing torch._inductor where the candidate never did (sysprof)
    cuda_arch: str = "auto"
    build_max_jobs: int = 2
    judge_device: str = "auto"  # where the parent compares outputs: auto (the slot's GPU, else cpu) | cpu
    staged_tasks: int = 4  # tasks whose inputs stay serialized in a sealed memfd (Linux)
    build_nice: int = 10  # builds yield the CPU to the GPU slot's work (IPC, judging)
    oom_retry_alone: bool = True  # out of memory beside other candidates: once more with the slot to itself (oom.py)
    fast_build: bool = True
    build_speed: dict = _d(pch="auto", pch_cflags=[[], ["-O3"]], pch_wait_s=120, nvcc_threads=4, split_launchers=True,
                           light_binding=True, light_pch=True)  # compiler-level build cuts (buildspeed.py, pchwarm.py)
    # construct ModelNew in the build worker so builds in __init__ happen there (construct.py)
    build_construct: dict = _d(enabled=True, timeout_s=60, memory_gb=16, cuda_on_cpu=True, run_compile=False)
    ceilings: dict = _d(bandwidth_Bps=4.8e12,  # H200 datasheet peaks (a floor must be a floor)
                        peak_flops={"float32": 6.7e13, "float16": 9.9e14, "bfloat16": 9.9e14},
                        peak_flops_tf32=4.9e14)
    profiling: dict = field(default_factory=dict)  # levels and budgets; see profcfg.DEFAULTS

    @classmethod
    def from_mapping(cls, m: dict | None) -> HarnessConfig:
        m = dict(m or {})
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(m) - names)
        if unknown:
            raise ValueError(f"unknown harness config key(s) {unknown}; known keys: {sorted(names)}")
        base = cls()
        for k, v in m.items():
            cur = getattr(base, k)
            if isinstance(cur, dict) and isinstance(v, dict):
                v = {**cur, **v}  # partial overrides of a nested table keep the other entries
            setattr(base, k, v)
        from rewards.harness import hostmem, profcfg

        base.profiling = profcfg.resolve(base.profiling)  # unknown profiling keys fail here
        hostmem.budget_bytes(base.host_memory_gb)  # so does a bad memory budget
        if base.input_sets < 3 or base.trials < 1:
            raise ValueError("harness.input_sets must be >= 3 and harness.trials >= 1")
        if not (base.judge_device in ("auto", "cpu") or str(base.judge_device).startswith("cuda")):
            raise ValueError(f"harness.judge_device must be auto, cpu or cuda[:N], not {base.judge_device!r}")
        if base.model_mode not in MODEL_MODES:
            raise ValueError(f"harness.model_mode must be one of {list(MODEL_MODES)}, not {base.model_mode!r}")
        if set(base.build_speed) - {"pch", "pch_cflags", "pch_wait_s", "nvcc_threads", "split_launchers", "light_binding",
                                    "light_pch"}:
            raise ValueError("harness.build_speed takes pch, pch_cflags, pch_wait_s, nvcc_threads, split_launchers, "
                             f"light_binding and light_pch, not {sorted(base.build_speed)}")
        if base.build_speed.get("pch", "auto") not in ("auto", True, False):
            raise ValueError(f"harness.build_speed.pch must be auto, true or false, not {base.build_speed['pch']!r}")
        cf = base.build_speed.get("pch_cflags", [])
        if not (isinstance(cf, list) and all(isinstance(x, list) and all(isinstance(f, str) for f in x) for x in cf)):
            raise ValueError(f"harness.build_speed.pch_cflags must be a list of flag lists, not {cf!r}")
        w = base.build_speed.get("pch_wait_s", 0)
        if isinstance(w, bool) or not isinstance(w, (int, float)) or w < 0:
            raise ValueError(f"harness.build_speed.pch_wait_s must be seconds >= 0, not {w!r}")
        bad = sorted(set(base.precision) - {"matmul_tf32", "cudnn_tf32"})
        if bad or not all(isinstance(v, bool) for v in base.precision.values()):
            raise ValueError(f"harness.precision takes matmul_tf32 and cudnn_tf32 (true/false), not {base.precision!r}")
        if base.build_order not in ("longest", "fifo"):
            raise ValueError(f"harness.build_order must be longest or fifo, not {base.build_order!r}")
        g = base.build_gather_s
        if isinstance(g, bool) or not isinstance(g, (int, float)) or not 0 <= g <= 5:
            raise ValueError(f"harness.build_gather_s must be seconds in [0, 5], not {g!r}")
        if base.profile_worker not in ("same", "fresh"):
            raise ValueError(f"harness.profile_worker must be same or fresh, not {base.profile_worker!r}")
        if base.sandbox is False:  # YAML 1.1 reads a bare `off` as false
            base.sandbox = "off"
        if base.sandbox not in ("strict", "best", "off"):
            raise ValueError(f"harness.sandbox must be strict, best or off, not {base.sandbox!r}")
        b = base.timing_budget_ms
        if isinstance(b, bool) or not isinstance(b, (int, float)) or b < 0:
            raise ValueError(f"harness.timing_budget_ms must be milliseconds >= 0 (0: always timed_calls), not {b!r}")
        if not (isinstance(base.min_timed_calls, int) and isinstance(base.timed_calls, int)
                and 1 <= base.min_timed_calls and 1 <= base.timed_calls):
            raise ValueError("harness.timed_calls and harness.min_timed_calls must be integers >= 1")
        lo, hi = (float(v) for v in base.timing_scale_range)
        if not 0 < lo <= hi:
            raise ValueError("harness.timing_scale_range must be [lo, hi] with 0 < lo <= hi")
        return base

    def calls_for(self, forward_us: float | None) -> int:
        """Timed calls of every measurement of one task, its reference's and each candidate's alike:
        ``timed_calls``, or under ``timing_budget_ms`` as many of the reference's forwards
        (``forward_us``, its fastest preparation forward) as fill the budget, rounded up to a ten
        (a cached baseline's key holds the count; tens keep it from moving with jitter), between
        ``min_timed_calls`` and ``timed_calls``. Like triton's do_bench, a time budget: 100 calls
        of a 10-30 ms Level 3 model held the GPU lock 1-3 s per measurement.

        >>> c = HarnessConfig(timing_budget_ms=300)
        >>> c.calls_for(16_000.0), c.calls_for(5_000.0), c.calls_for(100.0), c.calls_for(None)
        (20, 60, 100, 100)
        >>> HarnessConfig(timing_budget_ms=0).calls_for(16_000.0)  # no budget: KernelBench's count
        100
        """
        if not self.timing_budget_ms or not forward_us or forward_us <= 0:
            return self.timed_calls
        n = math.ceil(self.timing_budget_ms * 1e3 / forward_us / 10) * 10
        return max(min(self.min_timed_calls, self.timed_calls), min(self.timed_calls, n))

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @property
    def cache_path(self) -> str:
        return os.path.abspath(os.path.expanduser(self.cache_dir))

    def resolved_device(self) -> str:
        if self.device != "auto":
            return self.device
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    def n_build_workers(self) -> int:
        """auto: builds x ninja jobs ~ cores (more only delays every build, and the GPU waits)."""
        if self.build_workers == "auto":
            return max(1, (os.cpu_count() or 1) // max(1, int(self.build_max_jobs)))
        return int(self.build_workers)

    def n_exec_workers(self, device: str) -> int:
        if device != "cuda":
            return max(1, int(self.cpu_workers))
        if self.gpu_workers == "auto":
            import torch

            return max(1, torch.cuda.device_count())
        return int(self.gpu_workers)

    def n_resident(self, device: str) -> int:
        """Candidates resident (loaded, in trials or timing) on one slot at once."""
        if self.resident == "auto":
            return 6 if device == "cuda" else 2
        return max(1, int(self.resident))

    def n_profiler_spares(self, device: str) -> int:
        """Warm profiler workers per slot: each resident candidate takes one when it starts."""
        if self.profiler_spares == "auto":
            return self.n_resident(device)
        return max(1, int(self.profiler_spares))

    def n_reference_workers(self, device: str) -> int:
        """Reference processes (tasks prepared in parallel)."""
        if self.reference_workers == "auto":
            return 4 if device == "cuda" else 2
        return max(1, int(self.reference_workers))

    def n_reference_profilers(self, device: str) -> int:
        """Reference profiles (``profile_reference_apart``) run at once off the reference threads,
        each in a profiler process kept for references; 0: on the reference's thread, a fresh
        process each (taken from the candidates' spares)."""
        if self.reference_profilers == "auto":
            return self.n_reference_workers(device)
        return max(0, int(self.reference_profilers))

    def pch_wanted(self, device: str) -> bool:
        """build_speed.pch: auto = on for cuda (CPU runs build small C++ units; a PCH there costs
        more than it saves)."""
        p = self.build_speed.get("pch", "auto")
        return device == "cuda" if p == "auto" else bool(p)

    def n_reference_spares(self, device: str) -> int:
        """Warm reference processes per slot: where the reference worker profiles (GPU, profiling,
        not ``profile_reference_apart``) every task's baseline is timed by a fresh process (CUPTI
        slows a used one), whose start-up and FlopCounterMode warm-up otherwise delay the next
        task by ~10 s."""
        if self.reference_spares == "auto":
            renewed = device == "cuda" and self.profile and not self.profile_reference_apart
            return self.n_reference_workers(device) if renewed else 0
        return max(0, int(self.reference_spares))

    def primary_mode(self) -> str:
        """The mode timed, profiled and baselined: eval only when asked for eval alone."""
        return "eval" if self.model_mode == "eval" else "train"

    def trial_modes(self) -> list[str]:
        """Correctness modes in run order: eval first under ``both``, so the training-mode trials'
        BatchNorm running-stat updates cannot reach the eval-mode outputs (the reference runs
        in the same order)."""
        return ["eval", "train"] if self.model_mode == "both" else [self.primary_mode()]

    def tf32_allowed(self) -> bool:
        return bool(self.precision.get("matmul_tf32") or self.precision.get("cudnn_tf32"))

    def overrides_for(self, task: Any, device: str) -> dict:
        small = dict(getattr(task, "small", None) or {})
        if self.shrink is True or (self.shrink == "auto" and device == "cpu"):
            return small
        return {}
