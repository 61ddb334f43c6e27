"""Content-hash build cache around ``torch.utils.cpp_extension.load_inline``.

Candidates call load_inline themselves (KernelBench style). Inside a worker we replace it:
the key hashes the sources, the flags, the toolchain and the torch version; the build goes
to ``<cache>/ext/<key>``; a finished build leaves a marker, and later loads import the .so
directly (no ninja, no compiler), which is what makes a rebuild a cache hit.

Build-time cuts (GPU, ``fast_build``): ``#include <torch/extension.h>`` in CUDA sources is
replaced by nothing when the C++ sources carry the bindings (load_inline already prepends
``torch/types.h``; extension.h drags pybind11 and Python headers into nvcc, the measured
critical path: 64 s vs 36 s on the H200), and a single target arch is compiled
(TORCH_CUDA_ARCH_LIST set by the harness). When the CUDA sources do not use torch at all
(raw-pointer kernels and launchers, the tensors handled in the C++ sources), they are built
with ``no_implicit_headers`` and only cuda.h/cuda_runtime.h, so nvcc never parses the torch
headers (torch/extension.h still goes to the C++ binding sources). If the rewritten source
fails to build, the original is built instead, so a rewrite can only save time, never break
a candidate; the record says which rewrite ran (``fast_build``).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import inspect
import json
import os
import re
import shutil
import subprocess
import time

import torch
import torch.utils.cpp_extension as ce

from rewards.harness import buildspeed

_ORIG = ce.load_inline
_ORIG_LOAD = ce.load
_EXT_H = re.compile(r"^[ \t]*#[ \t]*include[ \t]*<torch/extension\.h>[ \t]*$", re.M)
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)  # strings stay: an #include "torch/..." must count
# anything that needs the torch headers in a CUDA translation unit
_USES_TORCH = re.compile(r"\b(?:torch|at|c10|pybind11|TORCH_\w+|AT_\w+|C10_\w+|PYBIND11_\w+|Py\w+)\b"
                         r"|#\s*include\s*[<\"](?:torch|ATen|c10|pybind11|Python)")
_HAS_NO_IMPLICIT = "no_implicit_headers" in inspect.signature(_ORIG).parameters
MARKER = ".km_done"

FAILED = ".km_failed"  # a build of this key failed; holds the compiler's message
# filled by the worker: what each load_inline/load call did (build_s, cache_hit, compiled: the
# compiler ran in this process, failed, rewrite: a fast-build rewrite's own attempt)
RECORDS: list[dict] = []
_FAILED_HERE: dict[str, str] = {}  # keys that failed in this process: never compiled twice here
_STATE = {"serve_failures": False}
GUARD = [contextlib.nullcontext]  # set by construct.py while it constructs the model


class BuildFailed(RuntimeError):
    """A build this process (or, served from the cache, the build worker) saw fail."""


@functools.cache
def toolchain() -> str:
    out = []
    for cmd in (["c++", "--version"], ["nvcc", "--version"]):
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
            out.append(p.stdout.strip().splitlines()[-1] if "nvcc" in cmd[0] else p.stdout.split("\n")[0])
        except (OSError, subprocess.SubprocessError, IndexError):
            out.append(f"{cmd[0]}: none")
    return "|".join(out)


def _as_list(x) -> list[str]:
    if x is None:
        return []
    return [x] if isinstance(x, str) else list(x)


def build_key(args: dict) -> str:
    material = {k: v for k, v in args.items() if k not in ("build_directory", "verbose")}
    material["cpp_sources"] = _as_list(material.get("cpp_sources"))
    material["cuda_sources"] = _as_list(material.get("cuda_sources"))
    material.update(torch=torch.__version__, cuda=torch.version.cuda, tool=toolchain(),
                    arch=os.environ.get("TORCH_CUDA_ARCH_LIST", ""))
    blob = json.dumps(material, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def uses_torch(cuda_source: str) -> bool:
    """
    >>> uses_torch('__global__ void k(float* x) {}  // torch::Tensor in a comment')
    False
    >>> uses_torch('torch::Tensor f(torch::Tensor x);'), uses_torch('#include <ATen/cuda/CUDAContext.h>')
    (True, True)
    """
    return bool(_USES_TORCH.search(_COMMENTS.sub(" ", cuda_source)))


def lighten(args: dict) -> tuple[dict, str | None]:
    """The fast-build rewrite of a call's arguments and its name (see module docstring)."""
    split = buildspeed.split_launchers(args, _STATE.get("speed"))  # launchers out of nvcc (falls back)
    if split is not None:
        return split, "split_launchers"
    cuda = _as_list(args.get("cuda_sources"))
    cpp = _as_list(args.get("cpp_sources"))
    if not cuda or not cpp or args.get("no_implicit_headers") or any("PYBIND11_MODULE" in s for s in cuda):
        return args, None
    new = [_EXT_H.sub("", s) for s in cuda]
    if _HAS_NO_IMPLICIT and not any(uses_torch(s) for s in new):
        return {**args, "no_implicit_headers": True,
                "cpp_sources": ["#include <torch/extension.h>", *cpp],
                "cuda_sources": ["#include <cuda.h>\n#include <cuda_runtime.h>", *new]}, "torch_free_cuda"
    return (args, None) if new == cuda else ({**args, "cuda_sources": new}, "no_extension_h")


def _cached(args: dict, bdir: str):
    """The module of a finished build in ``bdir`` (its marker present and it imports), else None."""
    if not os.path.exists(os.path.join(bdir, MARKER)):
        return None
    try:
        return ce._import_module_from_library(args["name"], bdir, args.get("is_python_module", True))
    except Exception:  # noqa: BLE001 - a damaged cache entry is rebuilt
        return None


def _load(args: dict, root: str, fast: str | None = None, builder=None, material: dict | None = None):
    key = build_key(material or args)
    bdir = os.path.join(root, key)
    rec = {"name": args["name"], "key": key, "cuda_sources": _as_list(args.get("cuda_sources")),
           "cpp_sources": _as_list(args.get("cpp_sources")), "fast_build": fast, "compiled": False,
           "failed": False, "rewrite": bool(fast) and not fast.startswith("fallback:")}
    t0 = time.perf_counter()
    guard = GUARD[0]()  # the construct step's budgets are off in here (its time, its memory cap)
    guard.__enter__()
    try:
        mod = _cached(args, bdir)
        hit = mod is not None
        if not hit:
            _raise_recorded(key, bdir, args["name"], _STATE["serve_failures"] or rec["rewrite"])
            os.makedirs(bdir, exist_ok=True)
            # One build of a key at a time across workers; the kernel drops the flock if its holder is
            # killed, unlike torch's own ``lock`` file, which a killed build leaves behind and which
            # then stalls every later build of that key until the build timeout.
            with _lock_file(key, bdir, args["name"]) as lk:
                fcntl.flock(lk, fcntl.LOCK_EX)
                mod = _cached(args, bdir)  # built by another worker while we waited
                hit = mod is not None
                if not hit:
                    _raise_recorded(key, bdir, args["name"], _STATE["serve_failures"] or rec["rewrite"])
                    _clear(bdir)
                    mod = _compile(args, bdir, key, rec, builder or _ORIG)
    except BaseException as e:
        rec.update(failed=True, error=str(e)[-2000:], cache_hit=False, build_s=time.perf_counter() - t0)
        RECORDS.append(rec)
        e.km_build_failure = True  # the construct step tells a build failure from other errors by this
        raise
    finally:
        guard.__exit__(None, None, None)
    rec.update(cache_hit=hit, build_s=time.perf_counter() - t0)
    RECORDS.append(rec)
    return mod


def _lock_file(key: str, bdir: str, name: str):
    """The key's build lock. A build folder the orchestrator sealed after a failed build (read-only
    to workers: sandbox.seal_builds) cannot be built in again: its recorded failure is the answer."""
    try:
        return open(os.path.join(bdir, ".km_build_lock"), "w")
    except PermissionError as e:
        _raise_recorded(key, bdir, name, from_disk=True)
        raise PermissionError(f"harness: the build pool left no loadable build of '{name}' (cache key {key}) "
                              "and this sandboxed worker may not build one") from e


def _clear(bdir: str) -> None:
    """Empty a build folder before compiling into it (we hold its lock): ninja keeps any output
    newer than its inputs, so a ``.so`` planted in a folder nobody finished building would
    otherwise be linked into nothing and imported as this build's."""
    for n in os.listdir(bdir):
        if n != ".km_build_lock":
            p = os.path.join(bdir, n)
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(p)


def entries() -> list[dict]:
    """What this process's loads used, for the orchestrator's seals (cacheguard.py): per cache
    key whether this process compiled it (or failed to)."""
    return [{"key": r["key"], "compiled": r["compiled"], "failed": r["failed"]} for r in RECORDS]


def _raise_recorded(key: str, bdir: str, name: str, from_disk: bool) -> None:
    """A key that failed here, or (``from_disk``: candidate and profiler workers; for a fast-build
    rewrite, every worker) in an earlier build, fails again without running the compiler: a failing
    source is compiled once, in the build pool. The build worker retries a candidate's own failed
    source (a compiler killed by memory pressure must not fail it forever)."""
    msg = _FAILED_HERE.get(key)
    if msg is None and from_disk:
        try:  # no exists() first: the orchestrator may discard the folder between the two
            with open(os.path.join(bdir, FAILED)) as f:
                msg = f.read()
        except (FileNotFoundError, NotADirectoryError):
            pass
    if msg is not None:
        raise BuildFailed(f"Error building extension '{name}' (the build failed before): {msg[-1500:]}")


def _compile(args: dict, bdir: str, key: str, rec: dict, builder):
    for leftover in (MARKER, "lock", FAILED):  # a damaged build's marker; a killed build's lock
        if os.path.exists(os.path.join(bdir, leftover)):  # (we hold the key: nobody builds)
            os.remove(os.path.join(bdir, leftover))
    rec["compiled"] = True
    # torch renames a second build of one name in a process to <name>_v1 (its versioner assumes a
    # shared build folder); each key has its own folder, and a fresh worker imports <name> from it,
    # so a rewrite that failed before the candidate's own source built must not rename that build
    ce.JIT_EXTENSION_VERSIONER.entries.pop(args["name"], None)
    try:
        # copies: load_inline inserts its headers into the lists it is given, which would
        # change this call's key for any later use of the same arguments
        call = {**args, "build_directory": bdir}
        if builder is _ORIG:
            call.update(cpp_sources=_as_list(args.get("cpp_sources")),
                        cuda_sources=_as_list(args.get("cuda_sources")) or None)
        with buildspeed.wrapped(_STATE.get("speed")):  # compiler-level cuts, each with its fallback
            mod = builder(**call)
    except Exception as e:
        _FAILED_HERE[key] = str(e)[-3000:]
        with open(os.path.join(bdir, FAILED), "w") as f:
            f.write(_FAILED_HERE[key])
        raise
    open(os.path.join(bdir, MARKER), "w").close()
    rec["light_binding"] = buildspeed.light_outcome(bdir)
    return mod


def compiles() -> int:
    """Compiler runs in this process so far (builds, failed or not, that no cache served)."""
    return sum(1 for r in RECORDS if r["compiled"])


def _file_material(args: dict) -> dict:
    """``load``'s key material: the sources' and their directories' headers' contents, not paths."""
    def read(p):
        with open(p, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    srcs = [os.path.abspath(p) for p in _as_list(args.get("sources"))]
    dirs = sorted({os.path.dirname(p) for p in srcs} | {os.path.abspath(d) for d in _as_list(args.get("extra_include_paths"))})
    heads = {os.path.join(d, n): read(os.path.join(d, n)) for d in dirs if os.path.isdir(d)
             for n in sorted(os.listdir(d)) if n.endswith((".h", ".cuh", ".hpp", ".inl"))}
    # paths left out: each worker has its own cwd, so the same program writes its files elsewhere
    return {**{k: v for k, v in args.items() if k not in ("sources", "extra_include_paths")},
            "sources": [read(p) for p in srcs], "headers": sorted(heads.values())}


def install(cache_root: str, fast_build: bool, serve_failures: bool = False) -> None:
    """Replace load_inline and load (the module attributes, which any later `from ... import`
    picks up) in this process. ``serve_failures``: a key the build worker failed to build fails
    here from its record, without the compiler (candidate and profiler workers)."""
    _STATE["serve_failures"] = serve_failures
    _STATE["speed"] = buildspeed.from_env(cache_root)  # harness.build_speed, via the worker's env
    sig = inspect.signature(_ORIG)
    root = os.path.join(cache_root, "ext")
    lsig = inspect.signature(_ORIG_LOAD)

    def load(*a, **kw):
        bound = lsig.bind(*a, **kw)
        bound.apply_defaults()
        args = dict(bound.arguments)
        return _load(args, root, None, _ORIG_LOAD, _file_material(args))

    def load_inline(*a, **kw):
        bound = sig.bind(*a, **kw)
        bound.apply_defaults()
        args = dict(bound.arguments)
        fast = None
        if fast_build:
            light, fast = lighten(args)
            if fast is not None:
                try:
                    return _load(light, root, fast)
                except Exception:  # noqa: BLE001 - fall back to the candidate's own source
                    fast = f"fallback:{fast}"
        return _load(args, root, fast)

    load_inline.__wrapped__, load.__wrapped__ = _ORIG, _ORIG_LOAD
    ce.load_inline, ce.load = load_inline, load
