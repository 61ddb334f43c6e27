"""The Ray executor: harness workers as Ray actors (one GPU each), builds as Ray CPU tasks.

Per candidate: (1) a build task (CPU only, ``num_gpus=0``) compiles it into the harness build
cache; a failed build is the result, no GPU is touched; (2) a free actor, holding one harness
``Evaluator`` pinned to its one GPU (Ray sets ``CUDA_VISIBLE_DEVICES``), evaluates it; its own
build step is then a cache hit. Builds and executions overlap across the cluster.

A dead actor (node lost, OOM-killed, killed by hand) is replaced by a fresh one and the
candidate is retried up to ``max_retries`` times, then recorded as ``crashed``. (A candidate
that crashes its sandboxed worker process does not kill the actor: the harness already records
that as ``crashed`` and replaces the worker.) ``evidence["executor_retries"]`` counts retries.

Build cache across nodes: the build task and the actor must see the same ``harness.cache_dir``
(automatic on one node; a shared file system across nodes). Otherwise the actor rebuilds the
candidate itself: still correct, only the offloading of the build is lost.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import os
import queue
import threading
from dataclasses import dataclass
from typing import Any

from rewards.executors import ExecutorConfig, ExecutorError
from rewards.harness.config import HarnessConfig
from rewards.harness.result import EvalResult

_PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def import_ray():
    try:
        import ray
    except ImportError as e:
        raise ImportError('executor=ray needs Ray, which is not installed: pip install -e ".[ray]" '
                          "(or use executor=local).") from e
    return ray


@dataclass(frozen=True)
class TaskSpec:
    """What the harness needs of a task, as a plain picklable record (no project imports)."""
    id: str
    source: str
    hash: str
    small: dict | None = None

    @classmethod
    def of(cls, task: Any) -> TaskSpec:
        small = getattr(task, "small", None)
        return cls(str(task.id), task.source, task.hash, dict(small) if small else None)


class HarnessActor:
    """One harness ``Evaluator`` (one execution slot) living in a Ray actor process."""

    def __init__(self, harness: dict):
        from rewards.harness.evaluator import Evaluator

        self.ev = Evaluator(HarnessConfig.from_mapping(harness)).__enter__()

    def info(self) -> dict:
        return {**self.ev.info, "pid": os.getpid(),
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}

    def evaluate(self, spec: TaskSpec, source: str) -> EvalResult:
        r = self.ev.submit(spec, source).result()
        r.evidence["executor_pid"] = os.getpid()
        r.evidence["executor_gpu"] = os.environ.get("CUDA_VISIBLE_DEVICES")
        return r

    def close(self) -> None:
        self.ev.__exit__(None, None, None)


def build_candidate(source: str, harness: dict, arch: str | None) -> tuple[bool, EvalResult]:
    """Compile a candidate into the build cache in a CPU-only build worker (a Ray task body).

    Reuses the harness's own build step so a compile error is classified exactly as in the
    local executor.
    """
    from rewards.harness.evaluator import Evaluator

    ev = Evaluator(HarnessConfig.from_mapping(harness))  # not entered: no reference/exec workers
    ev.arch = arch
    ev.n_build, ev._build_spares = 0, queue.Queue()  # one cold build worker, no warm spares
    os.makedirs(ev.cache, exist_ok=True)
    r = ev.build(source)
    return r.compiled, r


def label(task: Any, source: str) -> str:
    """``<task id>#<hash of the source>``: names one candidate in ``busy()``."""
    return f"{task.id}#{hashlib.sha256(source.encode()).hexdigest()[:10]}"


def _actor_errors(ray) -> tuple[type[BaseException], ...]:
    ex = ray.exceptions
    return tuple(getattr(ex, n) for n in ("RayActorError", "ActorUnavailableError") if hasattr(ex, n))


class _Slot:
    def __init__(self, index: int, actor):
        self.index, self.actor, self.current, self.generation = index, actor, None, 0


class RayExecutor:
    """``submit(task, source) -> Future[EvalResult]`` over Ray actors; a context manager."""

    def __init__(self, cfg: ExecutorConfig, harness: HarnessConfig):
        self.ray = import_ray()
        self.cfg, self.hcfg = cfg, harness
        self._owns_ray = False
        self._lock = threading.Lock()
        self.replaced = 0

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> RayExecutor:
        ray, c = self.ray, self.cfg
        if not ray.is_initialized():
            env = dict(c.runtime_env or {})
            if c.address is None and not env:  # a local cluster: workers import this checkout
                env = {"env_vars": {"PYTHONPATH": os.pathsep.join(
                    p for p in (_PROJECT_ROOT, os.environ.get("PYTHONPATH", "")) if p)}}
            ray.init(address=c.address, namespace=c.namespace, runtime_env=env or None,
                     num_cpus=c.num_cpus if c.address is None else None,
                     include_dashboard=False, log_to_driver=False)
            self._owns_ray = True
        res = ray.cluster_resources()
        gpus = int(res.get("GPU", 0))
        dev = self.hcfg.device
        self.device = dev if dev != "auto" else ("cuda" if gpus else "cpu")
        if self.device == "cuda" and gpus == 0:
            raise ExecutorError("executor=ray with harness.device=cuda, but the Ray cluster has no GPU.")
        n = c.num_gpu_workers
        n = (gpus if self.device == "cuda" else 2) if n == "auto" else int(n)
        nb = c.num_build_workers
        nb = max(1, int(res.get("CPU", 1))) if nb == "auto" else int(nb)
        # each actor is one execution slot; its own build step only ever hits the cache
        self.actor_harness = {**self.hcfg.to_dict(), "device": self.device, "gpu_workers": 1,
                              "cpu_workers": 1, "build_workers": 1}
        self._actor_cls = ray.remote(HarnessActor).options(
            num_gpus=1 if self.device == "cuda" else 0, num_cpus=c.cpus_per_worker,
            max_restarts=0, max_concurrency=2)
        self._build_fn = ray.remote(build_candidate).options(num_cpus=c.build_cpus, num_gpus=0,
                                                             max_retries=1)
        self.slots = [_Slot(i, self._actor_cls.remote(self.actor_harness)) for i in range(n)]
        infos = ray.get([s.actor.info.remote() for s in self.slots])
        self.info = infos[0]
        self.arch = None if self.hcfg.cuda_arch == "auto" else self.hcfg.cuda_arch
        if self.device == "cuda" and self.arch is None:
            self.arch = self.info.get("capability")
        self._free: queue.Queue[_Slot] = queue.Queue()
        for s in self.slots:
            self._free.put(s)
        self._build_sem = threading.Semaphore(nb)
        self._pool = cf.ThreadPoolExecutor(n + nb + 1, thread_name_prefix="km-ray")
        return self

    def __exit__(self, *exc) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        for s in self.slots:
            try:
                self.ray.get(s.actor.close.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - already dead
                pass
            self.ray.kill(s.actor, no_restart=True)
        if self._owns_ray:
            self.ray.shutdown()

    def submit(self, task: Any, candidate_source: str) -> cf.Future:
        return self._pool.submit(self._evaluate, TaskSpec.of(task), candidate_source)

    def busy(self) -> dict[int, str]:
        """Slot index -> ``label(task, source)`` of what it evaluates now (monitoring, tests)."""
        with self._lock:
            return {s.index: s.current for s in self.slots if s.current is not None}

    # -- one candidate -------------------------------------------------------------------------
    def _evaluate(self, spec: TaskSpec, src: str) -> EvalResult:
        ray = self.ray
        with self._build_sem:
            ok, built = ray.get(self._build_fn.remote(src, self.actor_harness, self.arch))
        if not ok:
            return built
        retries = 0
        while True:
            slot = self._free.get()
            with self._lock:
                slot.current = label(spec, src)
            try:
                r = ray.get(slot.actor.evaluate.remote(spec, src))
            except _actor_errors(ray) as e:
                self._replace(slot)
                retries += 1
                if retries > self.cfg.max_retries:
                    r = EvalResult(status="crashed", device=self.device, torch=built.torch,
                                   compiled=True, error=f"the harness worker died {retries} times "
                                   f"evaluating this candidate ({type(e).__name__})")
                    break
                continue
            with self._lock:
                slot.current = None
            self._free.put(slot)
            break
        r.build_s, r.cache_hit = built.build_s, built.cache_hit  # the build task's, not the re-load's
        r.evidence["executor_retries"] = retries
        return r

    def _replace(self, slot: _Slot) -> None:
        """A fresh actor in the dead one's place (then the slot is free again)."""
        try:
            self.ray.kill(slot.actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
        slot.actor = self._actor_cls.remote(self.actor_harness)
        slot.generation += 1
        with self._lock:
            slot.current = None
            self.replaced += 1
        self._free.put(slot)
