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

import fcntl
import functools
import hashlib
import inspect
import json
import os
import re
import subprocess
import time

import torch
import torch.utils.cpp_extension as ce

_ORIG = ce.load_inline
_EXT_H = re.compile(r"^[ \t]*#[ \t]*include[ \t]*<torch/extension\.h>[ \t]*$", re.M)
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)  # strings stay: an #include "torch/..." must count
# anything that needs the torch headers in a CUDA translation unit
_USES_TORCH = re.compile(r"\b(?:torch|at|c10|pybind11|TORCH_\w+|AT_\w+|C10_\w+|PYBIND11_\w+|Py\w+)\b"
                         r"|#\s*include\s*[<\"](?:torch|ATen|c10|pybind11|Python)")
_HAS_NO_IMPLICIT = "no_implicit_headers" in inspect.signature(_ORIG).parameters
MARKER = ".km_done"

# filled by the worker: what each load_inline call did (build_s, cache_hit, sources)
RECORDS: list[dict] = []


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


def _load(args: dict, root: str, fast: str | None = None):
    key = build_key(args)
    bdir = os.path.join(root, key)
    rec = {"name": args["name"], "key": key, "cuda_sources": _as_list(args.get("cuda_sources")),
           "cpp_sources": _as_list(args.get("cpp_sources")), "fast_build": fast}
    t0 = time.perf_counter()
    mod = _cached(args, bdir)
    hit = mod is not None
    if not hit:
        os.makedirs(bdir, exist_ok=True)
        # One build of a key at a time across workers; the kernel drops the flock if its holder is
        # killed, unlike torch's own ``lock`` file, which a killed build leaves behind and which
        # then stalls every later build of that key until the build timeout.
        with open(os.path.join(bdir, ".km_build_lock"), "w") as lk:
            fcntl.flock(lk, fcntl.LOCK_EX)
            mod = _cached(args, bdir)  # built by another worker while we waited
            hit = mod is not None
            if not hit:
                for leftover in (MARKER, "lock"):  # a damaged build's marker; a killed build's lock
                    if os.path.exists(os.path.join(bdir, leftover)):  # (we hold the key: nobody builds)
                        os.remove(os.path.join(bdir, leftover))
                # copies: load_inline inserts its headers into the lists it is given, which would
                # change this call's key for any later use of the same arguments
                mod = _ORIG(**{**args, "build_directory": bdir, "cpp_sources": _as_list(args.get("cpp_sources")),
                               "cuda_sources": _as_list(args.get("cuda_sources")) or None})
                open(os.path.join(bdir, MARKER), "w").close()
    rec.update(cache_hit=hit, build_s=time.perf_counter() - t0)
    RECORDS.append(rec)
    return mod


def install(cache_root: str, fast_build: bool) -> None:
    """Replace load_inline (both module attribute and any `from ... import`) in this process."""
    sig = inspect.signature(_ORIG)
    root = os.path.join(cache_root, "ext")

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

    load_inline.__wrapped__ = _ORIG
    ce.load_inline = load_inline
