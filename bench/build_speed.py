"""Build time of real-style load_inline sources: the original recipe against the fast one.

    python bench/build_speed.py --jobs 8 --out $OUT/build_speed.txt       # on the GPU machine
    python bench/build_speed.py --jobs 1 -n 3 --cuda-home /usr/local/cuda  # CPU-only torch: compiles, link fails

Sources: the first ``-n`` programs of the real corpus (``bench/real_code/data``, git-ignored; carry
it to the GPU machine) whose module-level ``load_inline`` call has CUDA sources, else the
real-style programs in ``bench/build_sources/``. Their arguments are captured by running each
program with load_inline recorded (nothing is built then).

Each (source, recipe) pair is built once, in a fresh build directory, through the harness's own
path (``buildcache.install``), ``--jobs`` builds at once (each with MAX_JOBS=2 compilers, as the
build pool runs them), one recipe after the other:

- ``orig``: the candidate's arguments unchanged (fast_build off, no compiler wrappers);
- ``fast``: ``harness.fast_build`` (lighter headers in CUDA units, with fallback) and
  ``harness.build_speed`` (launchers split out of the ``.cu``, light headers for the binding
  unit, nvcc threads, the shared PCHs as GPU runs of the harness use them; ``--pch 0`` without);
- ``fast-fullpch``: ``fast`` with ``build_speed.light_pch`` off (the binding unit on the
  torch/extension.h PCH, not the light headers' one), in the same cache: the same PCHs, its own builds.

The fast recipe's PCH is built once before timing (its one-time cost is printed), as the build
cache keeps it for every later build. Prints median and p90 wall seconds per recipe, the ratio,
the compilers' CPU seconds, and which rewrites ran.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "bench", "real_code", "data")
OWN = os.path.join(ROOT, "bench", "build_sources")
KEEP = ("name", "cpp_sources", "cuda_sources", "functions", "extra_cflags", "extra_cuda_cflags",
        "extra_ldflags", "extra_include_paths", "with_cuda", "with_pytorch_error_handling")
WARM = {"name": "km_warm", "cpp_sources": "torch::Tensor id(torch::Tensor x);", "functions": ["id"],
        "cuda_sources": "#include <torch/extension.h>\n__global__ void k(float* x) {}\n"
                        "torch::Tensor id(torch::Tensor x) { k<<<1, 1>>>(x.data_ptr<float>()); return x; }\n"}


# -- capture: run a program with load_inline recorded (in a child: programs may do anything) ------
def capture_child(paths: list[str]) -> None:
    import inspect
    import types

    import torch.utils.cpp_extension as ce

    sig, calls = inspect.signature(ce.load_inline), []

    def record(*a, **kw):
        args = dict(sig.bind(*a, **kw).arguments)
        calls.append({k: v for k, v in args.items() if k in KEEP})
        return types.SimpleNamespace()

    ce.load_inline = record
    out = {}
    for p in paths:
        calls.clear()
        try:
            with open(p) as f:
                exec(compile(f.read(), p, "exec"), {"__name__": "km_capture"})  # noqa: S102 - corpus programs
        except BaseException:  # noqa: BLE001 - a program failing after its load_inline call is fine
            pass
        out[p] = [c for c in calls if c.get("cuda_sources")][:1]
    json.dump(out, sys.stdout)


def sources(n: int, corpus: str) -> list[tuple[str, dict]]:
    paths = sorted(glob.glob(os.path.join(corpus, "*", "runs", "*", "level_3_problem_*_kernel.py")))
    paths = [p for p in paths if "load_inline" in open(p, errors="replace").read()]
    runs: dict[str, list[str]] = {}
    for p in paths:  # round-robin over the runs (models): a spread, not one model's first programs
        runs.setdefault(os.path.dirname(p), []).append(p)
    paths = [q for i in range(max(map(len, runs.values()), default=0)) for r in sorted(runs) for q in runs[r][i:i + 1]]
    if not paths:
        paths = sorted(glob.glob(os.path.join(OWN, "*.py")))
    got: list[tuple[str, dict]] = []
    for i in range(0, len(paths), 4 * n):  # capture in chunks until n sources have a call
        chunk = paths[i:i + 4 * n]
        p = subprocess.run([sys.executable, __file__, "--capture", *chunk], capture_output=True, text=True,
                           timeout=600, cwd=tempfile.gettempdir())
        calls = json.loads(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else {}
        got += [(path, c[0]) for path, c in calls.items() if c]
        if len(got) >= n:
            break
    # fewer sources than n (bench/build_sources): repeat them; each copy is its own build (the
    # extension name differs, so does the cache key)
    return [got[i % len(got)] for i in range(n)] if got else []


# -- one build (in a child: a fresh process, as a build worker is) -------------------------------
def build_child(spec_file: str) -> None:
    import resource

    import torch.utils.cpp_extension as ce

    with open(spec_file) as f:
        spec = json.load(f)
    if spec.get("cuda_home") and not ce.CUDA_HOME:
        # CPU-only torch: compile with a local CUDA, link against empty stand-ins for torch's CUDA
        # libraries, and skip the import (it cannot load without them): the compilers' time is real
        ce.CUDA_HOME = spec["cuda_home"]
        stubs = os.path.join(os.path.dirname(spec["cache"]), "stublib")
        spec["args"]["extra_ldflags"] = [*(spec["args"].get("extra_ldflags") or []), f"-L{stubs}"]
        ce._import_module_from_library = lambda *a, **k: object()
    sys.path.insert(0, ROOT)
    from rewards.harness import buildcache, buildspeed

    fast = spec["recipe"].startswith("fast")
    if fast:
        os.environ[buildspeed.SWITCHES_ENV] = json.dumps(spec["build_speed"])
    buildcache.install(spec["cache"], fast_build=fast)
    t0, c0, err = time.perf_counter(), time.process_time(), None
    try:
        ce.load_inline(**spec["args"])
    except Exception as e:  # noqa: BLE001 - reported, not raised
        err = str(e).strip().splitlines()[-1][:200] if str(e).strip() else type(e).__name__
    wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    recs = buildcache.RECORDS
    # py: this process's own CPU in load_inline (cpp_extension, the wrappers' set-up), start: its
    # imports before it (torch): a build worker pays both beside the compilers (worker:build)
    print(json.dumps({"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "error": err,
                      "py_cpu_s": time.process_time() - c0, "start_cpu_s": c0,
                      "rewrites": [r.get("fast_build") for r in recs if r.get("fast_build")]}))


def run_build(spec: dict, work: str) -> dict:
    fd, path = tempfile.mkstemp(suffix=".json", dir=work)
    with os.fdopen(fd, "w") as f:
        json.dump(spec, f)
    env = {**os.environ, "MAX_JOBS": "2"}
    p = subprocess.run([sys.executable, __file__, "--build", path], capture_output=True, text=True, env=env)
    try:
        return {**json.loads(p.stdout.strip().splitlines()[-1]), **{k: spec[k] for k in ("recipe", "src")}}
    except (IndexError, json.JSONDecodeError):
        return {"wall_s": float("nan"), "cpu_s": float("nan"), "error": (p.stderr or "no output")[-300:],
                "rewrites": [], "recipe": spec["recipe"], "src": spec["src"]}


def stub_libs(d: str) -> None:
    """Empty libc10_cuda.so/libtorch_cuda.so, so that a CPU-only torch's CUDA builds link."""
    os.makedirs(d, exist_ok=True)
    src = os.path.join(d, "empty.c")
    with open(src, "w") as f:
        f.write("void km_empty(void) {}\n")
    for lib in ("c10_cuda", "torch_cuda"):
        subprocess.run(["cc", "-shared", "-fPIC", src, "-o", os.path.join(d, f"lib{lib}.so")], check=True)


def arch() -> str:
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return os.environ["TORCH_CUDA_ARCH_LIST"]
    import torch

    if torch.cuda.is_available():
        return "{}.{}".format(*torch.cuda.get_device_capability(0))  # the harness's cuda_arch: auto
    return "9.0"


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else float("nan")


# each recipe's settings on top of the command line's build_speed ("-" suffixed: the same cache)
RECIPES = {"orig": lambda speed: {}, "fast": lambda speed: {},
           "fast-fullpch": lambda speed: {"build_speed": {**speed, "light_pch": False}}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("-n", type=int, default=16, help="sources")
    ap.add_argument("--corpus", default=CORPUS)
    ap.add_argument("--recipes", default="orig,fast")
    ap.add_argument("--cuda-home", default=None, help="CUDA to compile with when torch has none (CPU torch)")
    ap.add_argument("--pch", type=int, default=1, help="0: without the shared PCH (on by default in GPU runs of the harness)")
    ap.add_argument("--nvcc-threads", type=int, default=4)
    ap.add_argument("--split", type=int, default=1, help="split_launchers (1/0)")
    ap.add_argument("--light", type=int, default=1, help="light_binding (1/0)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--capture", nargs="+", help=argparse.SUPPRESS)
    ap.add_argument("--build", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.capture:
        capture_child(a.capture)
        return 0
    if a.build:
        build_child(a.build)
        return 0
    os.environ["TORCH_CUDA_ARCH_LIST"] = arch()
    lines: list[str] = []

    def say(s: str) -> None:
        print(s, flush=True)
        lines.append(s)

    srcs = sources(a.n, a.corpus)
    recipes = a.recipes.split(",")
    speed = {"pch": bool(a.pch), "nvcc_threads": a.nvcc_threads, "split_launchers": bool(a.split), "light_binding": bool(a.light)}
    say(f"build_speed: {len(srcs)} sources, jobs={a.jobs}, MAX_JOBS=2, arch={os.environ['TORCH_CUDA_ARCH_LIST']}, "
        f"cores={os.cpu_count()}, recipes={recipes}, build_speed={speed}")
    work = tempfile.mkdtemp(prefix="km_build_speed_")
    if a.cuda_home:
        stub_libs(os.path.join(work, "stublib"))
    common = {"cuda_home": a.cuda_home, "build_speed": speed}
    unknown = set(recipes) - set(RECIPES)
    if unknown:
        ap.error(f"unknown recipes {sorted(unknown)} (known: {', '.join(RECIPES)})")
    if any(r.startswith("fast") for r in recipes):  # the PCHs, built once per flag set and kept by the cache, as in the harness
        w = run_build({**common, "recipe": "fast", "src": "warm-up", "cache": os.path.join(work, "fast"),
                       "args": WARM}, work)
        say(f"fast recipe one-time warm-up (PCH + a tiny extension): {w['wall_s']:.1f} s  error={w['error']}")
    jobs = [{**common, **RECIPES[r](speed), "recipe": r, "src": os.path.relpath(p, ROOT),
             "cache": os.path.join(work, r.split("-")[0]), "args": {**args, "name": f"{args['name']}_{i}_{r.replace('-', '_')}"}}
            for i, (p, args) in enumerate(srcs) for r in recipes]
    results, total = [], {}
    for rec in recipes:  # one recipe at a time: each is timed at its own steady load, as the pool runs it
        t0 = time.perf_counter()
        with cf.ThreadPoolExecutor(a.jobs) as ex:  # each line as it lands: a cut run still says something
            for f in cf.as_completed([ex.submit(run_build, j, work) for j in jobs if j["recipe"] == rec]):
                r = f.result()
                results.append(r)
                say(f"  {r['recipe']:4s} {r['wall_s']:7.1f} s wall {r['cpu_s']:7.1f} s cpu "
                    f"(python: start {r.get('start_cpu_s', float('nan')):.1f}, load_inline {r.get('py_cpu_s', float('nan')):.1f})  {r['src']}  "
                    f"rewrites={r['rewrites']} error={r['error']}")
        total[rec] = time.perf_counter() - t0
    med = {}
    for rec in recipes:
        w = [r["wall_s"] for r in results if r["recipe"] == rec and r["wall_s"] == r["wall_s"]]
        c = [r["cpu_s"] for r in results if r["recipe"] == rec and r["cpu_s"] == r["cpu_s"]]
        fails = sum(1 for r in results if r["recipe"] == rec and r["error"])
        med[rec] = statistics.median(w) if w else float("nan")
        say(f"{rec}: median {med[rec]:.1f} s  p90 {pct(w, 0.9):.1f} s  all {total[rec]:.0f} s  (compiler cpu median "
            f"{statistics.median(c) if c else float('nan'):.1f} s)  failed {fails}/{len(w)}")
    if {"orig", "fast"} <= set(med):
        say(f"ratio orig/fast (median wall): {med['orig'] / med['fast']:.2f}x")
    if {"fast-fullpch", "fast"} <= set(med):
        say(f"ratio fast-fullpch/fast (median wall; the light headers' PCH): {med['fast-fullpch'] / med['fast']:.2f}x")
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
