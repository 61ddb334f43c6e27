"""Faster builds of real ``load_inline`` sources (issue 17): compiler wrappers, each rewrite with
its own fallback to the unchanged command.

torch builds an extension by running ``$CXX`` on ``main.cpp`` (``#include <torch/extension.h>``,
the candidate's C++ and the pybind11 module) and ``nvcc`` on ``cuda.cu``. ``install()`` points
``CXX`` and ``PYTORCH_NVCC`` at two small wrappers (this file, run as a script with the standard
library only) for the duration of a build. What they do, each switch in ``harness.build_speed``:

- ``pch``: the C++ unit whose first line includes ``torch/extension.h`` is compiled with a
  precompiled ``torch/extension.h`` (``-include``), one per exact flag set (the unit's own flags
  minus its name, output and depfile) under ``<cache>/buildspeed/pch/<hash>``, shared by every
  later build. Two modes: ``"build"`` (or True) makes a missing PCH on first use, ``"use"`` only
  reads one that exists. Workers that run candidate code get ``"use"``: the PCHs are made by a
  process that runs none (pchwarm.py) and sealed by the orchestrator. GCC checks a PCH's flags
  itself and reads the header's text when it does not match (``-Winvalid-pch`` says so); a PCH
  that fails to build is never tried again; a compile that fails with the PCH goes on to
  ``light_binding`` and then the unchanged command, so a candidate's own error is what it sees.
  With ``light_binding`` on, the light headers get a PCH of their own (``km_torch_light.h``),
  tried first on the unit's light copy: GCC still instantiates the templates torch's headers use
  in every unit, ~6 s of an empty unit on the full PCH against ~4 s on the light one (2 cores).
- ``split_launchers`` (a rewrite of the call's arguments, not a wrapper; see splitcu.py): the
  ``torch::Tensor`` launchers leave the ``.cu`` for the binding unit, so nvcc compiles CUDA
  headers only; buildcache builds the original source when the split fails to build.
- ``light_binding``: when no PCH serves it, a C++ unit that includes ``torch/extension.h`` is
  compiled from a copy (beside it) where each such include is ``torch/types.h`` plus
  ``torch/python.h``: ATen, the ``torch::`` tensor functions and the pybind11 casters, without
  ``torch/all.h``'s nn, optim, data, jit and serialize headers (a third of a binding unit's compile).
  A unit that needs those fails to compile that way and is compiled again unchanged.
- ``nvcc_threads``: ``--threads N`` when the command compiles more than one GPU arch (the
  candidate's ``-gencode`` flags on top of the harness's single arch): nvcc then compiles the
  archs in parallel instead of one after another.

torch's own ``use_pch`` is not used: it writes the PCH into torch's install directory (shared by
every process, unlocked) and deletes it in every build that does not ask for it.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

PCH_HEADER = "km_torch_extension.h"
LIGHT_PCH_HEADER = "km_torch_light.h"  # the light_binding headers, precompiled
_EXT_INCLUDE = "#include <torch/extension.h>"
_EXT_INCLUDE_RE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*[<\"]torch/extension\.h[>\"]", re.M)
_LIGHT_INCLUDE = "#include <torch/types.h>\n#include <torch/python.h>"
LIGHT_OK = ".ok"  # beside a light copy that compiled
PCH_OK = ".km_pch.ok"  # beside a unit that compiled with a PCH
LIGHT_PCH_OK = ".km_light_pch.ok"  # beside a unit whose light copy compiled with the light PCH

# flags that differ between builds without changing what the header means
_DROP_WITH_VALUE = {"-o", "-MF", "-MT", "-MQ"}
_DROP = {"-c", "-MMD", "-MD"}
_ENV = "KM_BUILDSPEED"  # JSON: the wrappers' settings (the real compilers, the state dir, switches)
SWITCHES_ENV = "KM_BUILD_SPEED"  # JSON: harness.build_speed, set by the evaluator for every worker
# pch: a PCH is shared by every later build, so only a process that runs no candidate code makes
# one (pchwarm.py); workers read them where the sandbox shows them read-only (the evaluator decides)
DEFAULTS = {"pch": False, "nvcc_threads": 4, "split_launchers": True, "light_binding": True, "light_pch": True}


# -- the wrappers (run as ``python buildspeed.py cxx|nvcc ARGS``; standard library only) ------------
def _source(args: list[str], exts: tuple[str, ...]) -> str | None:
    srcs = [a for a in args if a.endswith(exts) and not a.startswith("-")]
    return srcs[0] if "-c" in args and len(srcs) == 1 else None


def pch_flags(args: list[str]) -> list[str]:
    """The flags a PCH for this compile must be built with: the command minus its source, output,
    depfile and extension name (GCC rejects a PCH whose flags differ in anything that matters).

    >>> pch_flags(['-MMD', '-MF', 'main.o.d', '-DTORCH_EXTENSION_NAME=m', '-Ia', '-O3', '-c', 'main.cpp', '-o', 'main.o'])
    ['-Ia', '-O3']
    """
    src = _source(args, (".cpp", ".cc", ".cxx"))
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in _DROP_WITH_VALUE:
            skip = True
        elif a not in _DROP and a != src and not a.startswith("-DTORCH_EXTENSION_NAME="):
            out.append(a)
    return out


def _binds_torch(src: str) -> bool:
    """The unit starts by including torch/extension.h (load_inline's main.cpp does)."""
    try:
        with open(src) as f:
            for line in f:
                if line.strip():
                    return line.strip() == _EXT_INCLUDE
    except OSError:
        pass
    return False


def _compiler_id(real: str) -> str:
    path = shutil.which(real) or real
    try:
        st = os.stat(os.path.realpath(path))
        return f"{os.path.realpath(path)}:{st.st_size}:{int(st.st_mtime)}"
    except OSError:
        return path


def ensure_pch(real: str, flags: list[str], state: str, build: bool = True, light: bool = False) -> str | None:
    """The header to ``-include`` (its ``.gch`` beside it), built once per flag set; None when it
    cannot be built (recorded, so nobody tries that flag set again) or, ``build`` False, when
    nobody has built it. ``light``: the light_binding headers instead of torch/extension.h."""
    name, text = (LIGHT_PCH_HEADER, _LIGHT_INCLUDE) if light else (PCH_HEADER, _EXT_INCLUDE)
    what = [_compiler_id(real), [f for f in flags if f]] + (["light"] if light else [])
    key = hashlib.sha256(json.dumps(what).encode()).hexdigest()[:24]
    d = os.path.join(state, "pch", key)
    hdr, gch, failed = (os.path.join(d, n) for n in (name, name + ".gch", ".failed"))
    if os.path.exists(gch):
        return hdr
    if os.path.exists(failed) or not build:
        return None
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, ".lock"), "w") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)  # one build of a PCH; the others wait, then use it
        if os.path.exists(gch) or os.path.exists(failed):
            return hdr if os.path.exists(gch) else None
        with open(hdr, "w") as f:
            f.write(text + "\n")
        tmp = f"{gch}.{os.getpid()}.tmp"
        p = subprocess.run([real, *flags, "-x", "c++-header", hdr, "-o", tmp], capture_output=True, text=True)
        if p.returncode != 0:
            with open(failed, "w") as f:
                f.write(p.stderr[-4000:])
            with contextlib.suppress(OSError):
                os.remove(tmp)
            return None
        os.replace(tmp, gch)  # readers see a whole .gch or none
    return hdr


def _try(fast: list[str], ok_marker: str | None = None) -> bool:
    """Run ``fast``; True (its output passed on) when it succeeded. ``ok_marker``: a file written
    then (the build's record reads it)."""
    p = subprocess.run(fast, capture_output=True)
    if p.returncode != 0:
        return False
    if ok_marker:
        with contextlib.suppress(OSError):
            open(ok_marker, "w").close()
    sys.stdout.buffer.write(p.stdout)
    sys.stderr.buffer.write(p.stderr)
    return True


def _run_with_fallback(fast: list[str], orig: list[str], ok_marker: str | None = None) -> int:
    """Run ``fast``; on failure run ``orig`` with the output inherited (the candidate's own error)."""
    return 0 if _try(fast, ok_marker) else subprocess.run(orig).returncode


def light_copy(src: str) -> str | None:
    """A copy of ``src`` beside it with every torch/extension.h include made light; None when it
    has none (or the copy cannot be written)."""
    try:
        with open(src) as f:
            text = f.read()
        light, n = _EXT_INCLUDE_RE.subn(_LIGHT_INCLUDE, text)
        if n == 0:
            return None
        root, ext = os.path.splitext(src)
        dst = f"{root}.km_light{ext}"
        with open(dst, "w") as f:
            f.write(light)
        return dst
    except OSError:
        return None


def light_outcome(build_dir: str) -> str | None:
    """What the binding unit's cuts did in a finished build: "light_pch" (its light copy compiled
    with the light PCH), "pch" (compiled with the torch/extension.h PCH), "light_binding" (every
    light copy compiled), "fallback:light_binding" (one did not), None (neither was tried)."""
    try:
        names = os.listdir(build_dir)
    except OSError:
        return None
    if any(n.endswith(LIGHT_PCH_OK) for n in names):
        return "light_pch"
    if any(n.endswith(PCH_OK) for n in names):
        return "pch"
    tried = [n for n in names if ".km_light." in n and not n.endswith(LIGHT_OK)]
    if not tried:
        return None
    return "light_binding" if all(n + LIGHT_OK in names for n in tried) else "fallback:light_binding"


def cxx_main(args: list[str], cfg: dict) -> int:
    real, orig = cfg["cxx"], [cfg["cxx"], *args]
    src = _source(args, (".cpp", ".cc", ".cxx"))
    if not src:
        return subprocess.run(orig).returncode
    hdr = light_hdr = None
    if cfg.get("pch") and _binds_torch(src):
        flags, build = pch_flags(args), cfg["pch"] != "use"
        light_pch = cfg.get("light_binding") and cfg.get("light_pch", True)
        # both, where PCHs are made (build mode: side by side), whichever this unit ends up using
        with cf.ThreadPoolExecutor(2) as ex:
            fl = ex.submit(ensure_pch, real, flags, cfg["state"], build, True) if light_pch else None
            ff = ex.submit(ensure_pch, real, flags, cfg["state"], build)
        with contextlib.suppress(OSError):
            light_hdr = fl.result() if fl else None
        with contextlib.suppress(OSError):
            hdr = ff.result()
    light = light_copy(src) if cfg.get("light_binding") else None
    # the light copy on the light PCH first: an empty unit on the torch/extension.h PCH still
    # takes ~6 s (GCC instantiates the templates its headers use), ~4 s on the light one
    tried_light = light_hdr is not None and light is not None
    if tried_light and _try([real, "-include", light_hdr, "-Winvalid-pch", *(light if a == src else a for a in args)],
                            src + LIGHT_PCH_OK):
        return 0
    if hdr is not None and _try([real, "-include", hdr, "-Winvalid-pch", *args], src + PCH_OK):
        return 0
    if light is not None and not tried_light:  # (a light copy that failed on its PCH fails without it)
        return _run_with_fallback([real, *(light if a == src else a for a in args)], orig, light + LIGHT_OK)
    return subprocess.run(orig).returncode


def n_archs(args: list[str]) -> int:
    """GPU code targets the command compiles.

    >>> n_archs(['-gencode=arch=compute_90,code=sm_90', '-gencode', 'arch=compute_80,code=sm_80'])
    2
    """
    n = sum(1 for a in args if a.startswith("-gencode=") or a.startswith("--generate-code="))
    n += sum(1 for i, a in enumerate(args[:-1]) if a in ("-gencode", "--generate-code"))
    return n


def nvcc_main(args: list[str], cfg: dict) -> int:
    real, orig = cfg["nvcc"], [cfg["nvcc"], *args]
    threads = int(cfg.get("nvcc_threads") or 0)
    has = any(a in ("-t", "--threads") or a.startswith("--threads=") or (a[:2] == "-t" and a[2:].isdigit()) for a in args)
    if threads > 1 and n_archs(args) > 1 and not has and _source(args, (".cu",)):
        return _run_with_fallback([real, "--threads", str(threads), *args], orig)
    return subprocess.run(orig).returncode


# -- the harness side (imports torch lazily: the wrappers must start fast) -----------------------
NVCC_DEFS = ["-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",  # torch's nvcc flags
              "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__"]


def _as_list(x) -> list[str]:
    return [] if x is None else [x] if isinstance(x, str) else list(x)


def split_launchers(args: dict, cfg: dict | None) -> dict | None:
    """load_inline arguments with the CUDA source split (splitcu.py): kernels and a trampoline per
    kernel in a torch-free ``.cu``, the ``torch::Tensor`` launchers in the C++ binding unit (which
    the PCH makes cheap). None when switched off or the source is not split; a split that fails to
    build is the caller's to fall back from."""
    import inspect

    import torch.utils.cpp_extension as ce

    from rewards.harness import splitcu

    cuda = _as_list(args.get("cuda_sources"))
    if not (cfg and cfg.get("split_launchers") and cuda) or args.get("no_implicit_headers") \
            or "no_implicit_headers" not in inspect.signature(ce.load_inline).parameters \
            or any("PYBIND11_MODULE" in s for s in cuda):
        return None
    parts = splitcu.split("\n".join(cuda))
    if parts is None:
        return None
    cu, host = parts
    # the host code that moved keeps the macros nvcc compiled it with: torch's and the candidate's
    defs = [*NVCC_DEFS, *(f for f in _as_list(args.get("extra_cuda_cflags")) if f.startswith(("-D", "-U")))]
    return {**args, "no_implicit_headers": True, "cuda_sources": [cu],
            "cpp_sources": ["#include <torch/extension.h>", *_as_list(args.get("cpp_sources")), host],
            "extra_cflags": [*_as_list(args.get("extra_cflags")), *defs]}


def _write_wrapper(bindir: str, name: str, role: str) -> str:
    path = os.path.join(bindir, name)
    text = f'#!/bin/sh\nexec "{sys.executable}" -I -S "{os.path.abspath(__file__)}" {role} "$@"\n'
    try:
        with open(path) as f:
            if f.read() == text:
                return path
    except OSError:
        pass
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o755)
    os.replace(tmp, path)
    return path


_RUNS: dict[str, bool] = {}


def _runs(wrapper: str, cfg: dict) -> bool:
    """The wrapper starts and reaches the real compiler (once per process and path)."""
    if wrapper not in _RUNS:
        try:
            p = subprocess.run([wrapper, "--version"], capture_output=True, timeout=60,
                               env={**os.environ, _ENV: json.dumps(cfg)})
            _RUNS[wrapper] = p.returncode == 0
        except (OSError, subprocess.SubprocessError):
            _RUNS[wrapper] = False
    return _RUNS[wrapper]


def settings(cache_root: str, switches: dict | None = None) -> dict:
    """The wrappers' settings: the compilers torch would use, the state dir, the switches."""
    import torch.utils.cpp_extension as ce

    sw = {**DEFAULTS, **(switches or {})}
    nvcc = os.environ.get("PYTORCH_NVCC") or (os.path.join(ce.CUDA_HOME, "bin", "nvcc") if ce.CUDA_HOME else "nvcc")
    cxx = os.environ.get("CXX", "c++")
    # never a wrapper as the real compiler (a second install in one process would loop)
    cxx, nvcc = ("c++" if "km-g++" in cxx else cxx), ("nvcc" if "km-nvcc" in nvcc else nvcc)
    pch = sw["pch"] if sw["pch"] in ("use", "build") else bool(sw["pch"])
    return {"cxx": cxx, "nvcc": nvcc, "state": os.path.join(cache_root, "buildspeed"),
            "pch": pch, "nvcc_threads": int(sw["nvcc_threads"] or 0),
            "split_launchers": bool(sw["split_launchers"]), "light_binding": bool(sw["light_binding"]),
            "light_pch": bool(sw["light_pch"])}


def from_env(cache_root: str) -> dict | None:
    """The settings for this worker: the switches the evaluator put in ``KM_BUILD_SPEED`` (the
    ``harness.build_speed`` table); None (builds unchanged) when unset or every switch is off."""
    raw = os.environ.get(SWITCHES_ENV)
    if not raw:
        return None
    sw = {**DEFAULTS, **json.loads(raw)}
    cuts = {k: v for k, v in sw.items() if k != "light_pch"}  # a refinement of pch and light_binding, nothing alone
    return settings(cache_root, sw) if any(cuts.values()) else None


@functools.cache
def _private_bin() -> str:
    return tempfile.mkdtemp(prefix="km-buildspeed-")


def _bindir(state: str) -> str:
    """Where the wrappers live: the shared state dir, or (a sandboxed worker, which sees the cache
    hidden and read-only) a private directory of this process's own."""
    d = os.path.join(state, "bin")
    try:
        os.makedirs(d, exist_ok=True)
        if os.access(d, os.W_OK | os.X_OK):
            return d
    except OSError:
        pass
    return _private_bin()


@contextlib.contextmanager
def wrapped(cfg: dict | None):
    """``CXX``/``PYTORCH_NVCC`` point at the wrappers for one build (torch reads them per build);
    nothing changes when ``cfg`` is None."""
    if cfg is None:
        yield
        return
    try:
        bindir = _bindir(cfg["state"])
        # "g++" in the name: torch's compiler check accepts a wrapper by its path
        env = {"CXX": _write_wrapper(bindir, "km-g++", "cxx"), "PYTORCH_NVCC": _write_wrapper(bindir, "km-nvcc", "nvcc"),
               _ENV: json.dumps(cfg)}
    except OSError:
        env = {}
    if not env or not _runs(env["CXX"], cfg):
        yield  # a wrapper that cannot run (a noexec cache, no python) must not fail every build
        return
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def main(argv: list[str]) -> int:
    cfg = json.loads(os.environ.get(_ENV) or "{}")
    role, args = argv[0], argv[1:]
    if role == "cxx":
        cfg.setdefault("cxx", "c++")
        return cxx_main(args, cfg)
    cfg.setdefault("nvcc", "nvcc")
    return nvcc_main(args, cfg)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
