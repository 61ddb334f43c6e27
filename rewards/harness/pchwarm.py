"""The shared precompiled ``torch/extension.h`` (buildspeed.py's ``pch``), made where no candidate
code runs and checked before any worker may read it (issue 17's build cut under issue 16's rule:
caches are written only by the orchestrator or a builder that runs no candidate code).

- ``prebuild`` runs fresh processes of the orchestrator's user (``python -m
  rewards.harness.pchwarm``): a tiny ``load_inline`` extension per entry of
  ``harness.build_speed.pch_cflags`` goes through the compiler wrappers in ``"build"`` mode, so
  the PCH is made with exactly the flags torch gives a candidate's binding unit (CUDA include
  paths and all, when CUDA is there). Its own build folder is a temporary one, never ``ext/``.
- ``seal`` (orchestrator, after that process exits) signs every PCH folder (cachemac, the cache's
  key) in ``<cache>/seals/pch``; ``verify`` (orchestrator, before workers start) deletes any PCH
  folder whose seal is missing or no longer matches and reports it (cachemac.problem).
- Workers get ``pch: "use"``: they read a sealed PCH through a read-only view and never make one.
  The evaluator turns the PCH off when the sandbox gives workers neither their own uid nor the
  read-only view (they could then rewrite a PCH that later builds include).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

from rewards.harness import cachemac

# load_inline puts torch/extension.h first in the binding unit, as it does for every candidate
_TINY_CPP = "int km_pch_probe() { return 1; }\n"
_TINY_CU = "__global__ void km_pch_k(float* x) { x[0] = 1.f; }\n"


def pch_root(cache_root: str) -> str:
    return os.path.join(cache_root, "buildspeed", "pch")


def _seal_dir(cache_root: str) -> str:
    return os.path.join(cache_root, "seals", "pch")


def _digest(d: str) -> bytes:
    return cachemac.tree_digest(d, frozenset({".lock"}))


def _digest_or_none(d: str) -> bytes | None:
    return _digest(d) if os.path.isdir(d) else None


def seal(cache_root: str, key_file: str | None = None) -> int:
    """Sign every PCH folder not signed yet; returns how many were signed."""
    root, n = pch_root(cache_root), 0
    if not os.path.isdir(root):
        return 0
    key = cachemac.load_key(cache_root, key_file)
    os.makedirs(_seal_dir(cache_root), exist_ok=True)
    for name in sorted(os.listdir(root)):
        sp = os.path.join(_seal_dir(cache_root), name + ".json")
        if os.path.exists(sp) or not os.path.isdir(os.path.join(root, name)):
            continue
        tag = cachemac.mac(key, "pch", name, _digest(os.path.join(root, name)))
        with open(sp, "w") as f:
            json.dump({"kid": cachemac.key_id(key), "mac": tag}, f)
        n += 1
    return n


def verify(cache_root: str, key_file: str | None = None, workers: int | None = None) -> list[dict]:
    """Delete every PCH folder whose seal is missing or does not match; the problems found.
    ``workers``: folders hashed at once (default: one per folder, up to the cores)."""
    root, problems = pch_root(cache_root), []
    if not os.path.isdir(root):
        return problems
    key = cachemac.load_key(cache_root, key_file)
    names = sorted(os.listdir(root))
    # every evaluator start reads them all (a flag set's two PCHs: ~1.4 GB): hashed side by side
    # (hashlib releases the GIL), not one after another
    with cf.ThreadPoolExecutor(workers or max(1, min(len(names), os.cpu_count() or 1))) as ex:
        digests = dict(zip(names, ex.map(_digest_or_none, [os.path.join(root, n) for n in names]), strict=True))
    for name in names:
        d, sp = os.path.join(root, name), os.path.join(_seal_dir(cache_root), name + ".json")
        try:
            with open(sp) as f:
                s = json.load(f)
        except (OSError, ValueError):
            s = None
        if not isinstance(s, dict):
            why = "unsigned"
        elif s.get("kid") != cachemac.key_id(key):
            why = "other_key"
        elif digests[name] is None or not cachemac.verify(key, "pch", name, digests[name], s.get("mac")):
            why = cachemac.TAMPER
        else:
            continue
        problems.append(cachemac.problem("pch", name, why))
        _remove(d)
        with contextlib.suppress(OSError):
            os.remove(sp)
    return problems


def _remove(p: str) -> None:
    """A folder with all in it, or a file or link (never followed)."""
    if os.path.isdir(p) and not os.path.islink(p):
        shutil.rmtree(p, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.remove(p)


def prebuild(cache_root: str, switches: dict, cflag_sets: list, key_file: str | None = None,
             arch: str | None = None, timeout_s: float = 600.0) -> dict:
    """Run the builder processes (no candidate code; one per flag set, at once), then seal what
    they made. Returns {"ok", "sealed", "errors"}; a failure only means builds go without it.
    ``arch``: the tiny CUDA unit's (one arch: the binding unit's flags do not depend on it)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "MAX_JOBS": "2",
           "TORCH_CUDA_ARCH_LIST": arch or os.environ.get("TORCH_CUDA_ARCH_LIST") or "9.0",
           "PYTHONPATH": os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])}
    index = os.path.join(_seal_dir(cache_root), "made.json")
    done = _read_index(index)
    wanted = flag_sets(switches, cflag_sets)
    light = bool(switches.get("light_binding", True) and switches.get("light_pch", True))

    def made(flags: list) -> bool:  # a set made with its light PCH has its full one too
        return _index_key(flags, True) in done or (not light and _index_key(flags, False) in done)

    todo = [f for f in wanted if not made(f)]
    if not todo:
        if os.path.isdir(pch_root(cache_root)) and os.listdir(pch_root(cache_root)):
            return {"ok": True, "sealed": 0, "errors": [], "skipped": "made before"}
        todo = wanted  # made before, and removed since
    procs, errors = [], []
    for flags in todo:
        job = json.dumps({"cache_root": cache_root, "switches": switches, "cflags": list(flags)})
        try:
            procs.append(subprocess.Popen([sys.executable, "-m", "rewards.harness.pchwarm", job], env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        except OSError as e:
            errors.append(str(e)[:300])
    for p in procs:
        try:
            _, err = p.communicate(timeout=timeout_s)
            if p.returncode != 0:
                errors.append((err.strip().splitlines() or ["failed"])[-1][:300])
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            errors.append(f"timed out after {timeout_s:.0f} s")
    if not errors:
        os.makedirs(_seal_dir(cache_root), exist_ok=True)
        with open(index, "w") as f:
            json.dump(sorted(done | {_index_key(x, light) for x in todo}), f)
    return {"ok": not errors, "sealed": seal(cache_root, key_file), "errors": errors}


def flag_sets(switches: dict, cflag_sets: list) -> list[list[str]]:
    """The extra_cflags to make a PCH for: each configured set and, with split_launchers on, the
    same set as a split binding unit gets it (the CUDA defines the launchers were compiled with
    are added: another flag set to GCC)."""
    from rewards.harness import buildspeed

    out = [list(f) for f in cflag_sets]
    if switches.get("split_launchers", True):
        out += [[*f, *buildspeed.NVCC_DEFS] for f in cflag_sets]
    return out


def _index_key(flags: list, light: bool = False) -> str:
    """A flag set made for this interpreter and torch (another torch gives other flags), with or
    without the light headers' PCH beside the full one."""
    import torch

    return json.dumps([sys.executable, torch.__version__, [f for f in flags if f]] + (["light"] if light else []))


def _read_index(path: str) -> set:
    try:
        with open(path) as f:
            return set(json.load(f))
    except (OSError, ValueError, TypeError):
        return set()


def discard_all(cache_root: str) -> None:
    """Every PCH and its seal gone (when they could not be checked): the prebuild makes them again.
    The root itself stays: workers already started see it through their read-only view."""
    root = pch_root(cache_root)
    for name in os.listdir(root) if os.path.isdir(root) else []:
        _remove(os.path.join(root, name))
    shutil.rmtree(_seal_dir(cache_root), ignore_errors=True)


def forget(cache_root: str) -> None:
    """After a discarded PCH: make every flag set again."""
    with contextlib.suppress(OSError):
        os.remove(os.path.join(_seal_dir(cache_root), "made.json"))


def _build_one(job: dict) -> None:
    """In a builder process: one tiny extension with the job's extra_cflags; its binding unit's
    compile makes the PCH for that flag set."""
    import torch.utils.cpp_extension as ce

    from rewards.harness import buildspeed

    cfg = buildspeed.settings(job["cache_root"], {**job["switches"], "pch": "build"})
    kw = {"cuda_sources": [_TINY_CU]} if ce.CUDA_HOME is not None else {}
    with tempfile.TemporaryDirectory(prefix="km-pchwarm-") as d, buildspeed.wrapped(cfg):
        with contextlib.suppress(Exception):  # a link or import that fails (no CUDA libs) does not matter
            ce.load_inline("km_pch_probe", [_TINY_CPP], build_directory=d, extra_cflags=job["cflags"], **kw)


if __name__ == "__main__":
    _build_one(json.loads(sys.argv[1]))
