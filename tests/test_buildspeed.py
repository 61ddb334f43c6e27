"""buildspeed: the compiler wrappers' cuts, each falling back to the unchanged command (fake
compilers that log their calls), and one real C++ build through the harness's cache (slow)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from rewards.harness import buildspeed

WRAP = [sys.executable, "-I", "-S", buildspeed.__file__]
EXT_UNIT = "#include <torch/extension.h>\nint f() { return 1; }\n"


def _fake(tmp_path, name: str, fail_if: str) -> str:
    """A compiler that logs its argv and fails when ``fail_if`` is among its arguments; given
    ``-o X`` it writes X (a PCH build's output)."""
    log = tmp_path / f"{name}.log"
    p = tmp_path / name
    p.write_text(f"""#!{sys.executable}
import sys, json
a = sys.argv[1:]
open({str(log)!r}, "a").write(json.dumps(a) + "\\n")
if "-o" in a:
    open(a[a.index("-o") + 1], "w").write("obj")
sys.exit(1 if {fail_if!r} in a else 0)
""")
    p.chmod(0o755)
    return str(p)


def _calls(tmp_path, name: str) -> list[list[str]]:
    f = tmp_path / f"{name}.log"
    return [json.loads(x) for x in f.read_text().splitlines()] if f.exists() else []


def _wrap(role: str, args: list[str], cfg: dict, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, buildspeed._ENV: json.dumps(cfg)}
    return subprocess.run([*WRAP, role, *args], env=env, cwd=cwd, capture_output=True, text=True)


def _unit(tmp_path, text=EXT_UNIT):
    (tmp_path / "main.cpp").write_text(text)
    return ["-MMD", "-MF", "main.o.d", "-DTORCH_EXTENSION_NAME=m1", "-Iinc", "-c", str(tmp_path / "main.cpp"), "-o", "main.o"]


def test_pch_used_and_shared_across_extensions(tmp_path):
    cxx = _fake(tmp_path, "cxx", fail_if="never")
    cfg = {"cxx": cxx, "state": str(tmp_path / "state"), "pch": True}
    args = _unit(tmp_path)
    assert _wrap("cxx", args, cfg, tmp_path).returncode == 0
    other = [a.replace("m1", "m2") for a in args]  # another extension, same flags: the same PCH
    assert _wrap("cxx", other, cfg, tmp_path).returncode == 0
    calls = _calls(tmp_path, "cxx")
    builds = [c for c in calls if "c++-header" in c]
    assert len(builds) == 1 and builds[0][:1] == ["-Iinc"]  # built once, with the unit's own flags
    compiles = [c for c in calls if "-c" in c]
    assert len(compiles) == 2 and all(c[0] == "-include" and c[1].endswith(buildspeed.PCH_HEADER) for c in compiles)
    # different flags (an -O3 in extra_cflags) get their own PCH
    _wrap("cxx", [*args[:-2], "-O3", *args[-2:]], cfg, tmp_path)
    assert len([c for c in _calls(tmp_path, "cxx") if "c++-header" in c]) == 2


def test_compile_failing_with_pch_reruns_unchanged(tmp_path):
    cxx = _fake(tmp_path, "cxx", fail_if="-include")
    cfg = {"cxx": cxx, "state": str(tmp_path / "state"), "pch": True}
    args = _unit(tmp_path)
    assert _wrap("cxx", args, cfg, tmp_path).returncode == 0
    assert _calls(tmp_path, "cxx")[-1] == args  # the fallback: the command torch wrote


def test_pch_that_fails_to_build_is_not_tried_again(tmp_path):
    cxx = _fake(tmp_path, "cxx", fail_if="c++-header")
    cfg = {"cxx": cxx, "state": str(tmp_path / "state"), "pch": True}
    args = _unit(tmp_path)
    assert _wrap("cxx", args, cfg, tmp_path).returncode == 0
    assert _wrap("cxx", args, cfg, tmp_path).returncode == 0
    calls = _calls(tmp_path, "cxx")
    assert sum("c++-header" in c for c in calls) == 1 and calls[1] == args and calls[2] == args


def test_candidate_error_is_the_unchanged_commands(tmp_path):
    cxx = _fake(tmp_path, "cxx", fail_if=str(tmp_path / "main.cpp"))  # a unit that cannot compile
    cfg = {"cxx": cxx, "state": str(tmp_path / "state"), "pch": True}
    assert _wrap("cxx", _unit(tmp_path), cfg, tmp_path).returncode == 1


def test_pch_only_for_torch_binding_units(tmp_path):
    cxx = _fake(tmp_path, "cxx", fail_if="never")
    cfg = {"cxx": cxx, "state": str(tmp_path / "state"), "pch": True}
    args = _unit(tmp_path, "#include <vector>\n#include <torch/extension.h>\n")  # not first: untouched
    _wrap("cxx", args, cfg, tmp_path)
    _wrap("cxx", ["main.o", "cuda.o", "-shared", "-o", "m.so"], cfg, tmp_path)  # the link
    _wrap("cxx", _unit(tmp_path), {**cfg, "pch": False}, tmp_path)  # switched off
    calls = _calls(tmp_path, "cxx")
    assert calls == [args, ["main.o", "cuda.o", "-shared", "-o", "m.so"], _unit(tmp_path)]


def test_light_binding_compiles_a_light_copy(tmp_path):
    cxx = _fake(tmp_path, "cxx", fail_if="never")
    cfg = {"cxx": cxx, "state": str(tmp_path / "state"), "light_binding": True}
    unit = "#include <torch/extension.h>\n#include <vector>\n  # include \"torch/extension.h\"\nint f();\n"
    args = _unit(tmp_path, unit)
    assert _wrap("cxx", args, cfg, tmp_path).returncode == 0
    (call,) = _calls(tmp_path, "cxx")
    light = tmp_path / "main.km_light.cpp"
    assert call == [str(light) if a == str(tmp_path / "main.cpp") else a for a in args]
    text = light.read_text()  # every include of the heavy header, not only the first line
    assert "extension.h" not in text and text.count("#include <torch/types.h>") == 2 and "#include <vector>" in text
    assert (tmp_path / "main.cpp").read_text() == unit  # the original is untouched
    assert buildspeed.light_outcome(str(tmp_path)) == "light_binding"


def test_light_binding_falls_back_and_leaves_other_units_alone(tmp_path):
    light_src = str(tmp_path / "main.km_light.cpp")
    cxx = _fake(tmp_path, "cxx", fail_if=light_src)  # a unit that needs torch/all.h (torch::nn, ...)
    cfg = {"cxx": cxx, "state": str(tmp_path / "state"), "light_binding": True}
    args = _unit(tmp_path)
    assert _wrap("cxx", args, cfg, tmp_path).returncode == 0
    assert _calls(tmp_path, "cxx")[-1] == args  # compiled again unchanged
    assert buildspeed.light_outcome(str(tmp_path)) == "fallback:light_binding"
    plain = _unit(tmp_path, "#include <vector>\nint f();\n")
    _wrap("cxx", plain, cfg, tmp_path)  # no torch header: nothing to lighten
    args = _unit(tmp_path)
    _wrap("cxx", args, {**cfg, "light_binding": False}, tmp_path)  # switched off
    _wrap("cxx", args, {**cfg, "pch": True}, tmp_path)  # a PCH serves the unit: the PCH, not the copy
    calls = _calls(tmp_path, "cxx")
    assert calls[2:4] == [plain, args] and calls[-1][0] == "-include"


def test_light_copy_compiles_on_a_light_pch_first(tmp_path):
    """With light_binding and pch on, the light headers get a PCH of their own (made beside the
    torch/extension.h one, both once); the unit's light copy is compiled on it."""
    cxx = _fake(tmp_path, "cxx", fail_if="never")
    cfg = {"cxx": cxx, "state": str(tmp_path / "state"), "pch": True, "light_binding": True}
    args = _unit(tmp_path)
    assert _wrap("cxx", args, cfg, tmp_path).returncode == 0
    assert _wrap("cxx", [a.replace("m1", "m2") for a in args], cfg, tmp_path).returncode == 0
    calls = _calls(tmp_path, "cxx")
    headers = sorted(os.path.basename(c[c.index("c++-header") + 1]) for c in calls if "c++-header" in c)
    assert headers == sorted([buildspeed.PCH_HEADER, buildspeed.LIGHT_PCH_HEADER])
    hdr = next(c[c.index("c++-header") + 1] for c in calls if "c++-header" in c and buildspeed.LIGHT_PCH_HEADER in c[-3])
    assert open(hdr).read().strip() == buildspeed._LIGHT_INCLUDE
    light = str(tmp_path / "main.km_light.cpp")
    compiles = [c for c in calls if "-c" in c]
    assert len(compiles) == 2 and all(c[:2] == ["-include", hdr] and light in c for c in compiles)
    assert buildspeed.light_outcome(str(tmp_path)) == "light_pch"


def test_a_unit_the_light_pch_cannot_compile_goes_to_the_full_pch(tmp_path):
    light = str(tmp_path / "main.km_light.cpp")
    cxx = _fake(tmp_path, "cxx", fail_if=light)  # needs torch/all.h (torch::nn, ...)
    cfg = {"cxx": cxx, "state": str(tmp_path / "state"), "pch": True, "light_binding": True}
    args = _unit(tmp_path)
    assert _wrap("cxx", args, cfg, tmp_path).returncode == 0
    compiles = [c for c in _calls(tmp_path, "cxx") if "-c" in c]
    assert len(compiles) == 2 and light in compiles[0]  # the light copy once, not again without its PCH
    assert compiles[1][:2] == ["-include", compiles[1][1]] and compiles[1][1].endswith(buildspeed.PCH_HEADER)
    assert compiles[1][2:] == ["-Winvalid-pch", *args]
    assert buildspeed.light_outcome(str(tmp_path)) == "pch"


def test_nvcc_threads_only_for_several_archs(tmp_path):
    nvcc = _fake(tmp_path, "nvcc", fail_if="never")
    cfg = {"nvcc": nvcc, "nvcc_threads": 4}
    one = ["-gencode=arch=compute_90,code=sm_90", "-c", "cuda.cu", "-o", "cuda.o"]
    two = ["-gencode=arch=compute_80,code=sm_80", *one]
    for args in (one, two, ["-t2", *two]):
        _wrap("nvcc", args, cfg, tmp_path)
    _wrap("nvcc", two, {**cfg, "nvcc_threads": 0}, tmp_path)
    assert _calls(tmp_path, "nvcc") == [one, ["--threads", "4", *two], ["-t2", *two], two]


def test_nvcc_failing_with_threads_reruns_unchanged(tmp_path):
    nvcc = _fake(tmp_path, "nvcc", fail_if="--threads")
    two = ["-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90", "-c", "cuda.cu"]
    assert _wrap("nvcc", two, {"nvcc": nvcc, "nvcc_threads": 4}, tmp_path).returncode == 0
    assert _calls(tmp_path, "nvcc")[-1] == two


def test_settings_from_env(tmp_path, monkeypatch):
    monkeypatch.delenv(buildspeed.SWITCHES_ENV, raising=False)
    assert buildspeed.from_env(str(tmp_path)) is None  # not asked for: builds unchanged
    monkeypatch.setenv(buildspeed.SWITCHES_ENV, json.dumps(
        {"pch": False, "nvcc_threads": 0, "split_launchers": False, "light_binding": False}))
    assert buildspeed.from_env(str(tmp_path)) is None
    monkeypatch.setenv(buildspeed.SWITCHES_ENV, json.dumps({"pch": True}))
    monkeypatch.setenv("CXX", "/x/km-g++")  # a wrapper left in the env is never the real compiler
    cfg = buildspeed.from_env(str(tmp_path))
    assert cfg["pch"] and cfg["cxx"] == "c++" and cfg["state"] == os.path.join(str(tmp_path), "buildspeed")
    with buildspeed.wrapped(cfg):
        assert os.environ["CXX"].endswith("km-g++") and os.access(os.environ["CXX"], os.X_OK)
    assert os.environ["CXX"] == "/x/km-g++"  # restored
    with buildspeed.wrapped({**cfg, "cxx": str(tmp_path / "no-such-compiler"), "state": str(tmp_path / "s2")}):
        assert os.environ["CXX"] == "/x/km-g++"  # a wrapper that cannot reach its compiler is not used


def test_config_keys():
    from rewards.harness.config import HarnessConfig

    assert HarnessConfig.from_mapping({"build_speed": {"pch": False}}).build_speed == {
        "pch": False, "pch_cflags": [[], ["-O3"]], "pch_wait_s": 120, "nvcc_threads": 4, "split_launchers": True,
        "light_binding": True, "light_pch": True}
    with pytest.raises(ValueError, match="build_speed"):
        HarnessConfig.from_mapping({"build_speed": {"pchh": True}})


CPP = """
#include <torch/extension.h>
torch::Tensor axpy(torch::Tensor x, double a) { return x * a + 1; }
"""


@pytest.mark.slow
def test_real_cpu_build_with_pch_matches_plain(tmp_path, monkeypatch, have_cxx):
    """A C++ extension built through the harness's cache with the PCH computes what the plain
    build computes; the PCH is made once and reused; the cache key still follows the source."""
    import torch
    import torch.utils.cpp_extension as ce

    from rewards.harness import buildcache

    x = torch.arange(6.0)
    try:
        monkeypatch.delenv(buildspeed.SWITCHES_ENV, raising=False)
        buildcache.install(str(tmp_path / "plain"), fast_build=False)
        plain = ce.load_inline("km_bs_plain", CPP, functions=["axpy"])
        monkeypatch.setenv(buildspeed.SWITCHES_ENV, json.dumps({"pch": True}))
        buildcache.install(str(tmp_path / "fast"), fast_build=False)
        fast = ce.load_inline("km_bs_fast", CPP, functions=["axpy"])
        fast2 = ce.load_inline("km_bs_fast2", CPP.replace("+ 1", "+ 2"), functions=["axpy"])
    finally:
        ce.load_inline, ce.load = buildcache._ORIG, buildcache._ORIG_LOAD
    assert torch.equal(plain.axpy(x, 3.0), fast.axpy(x, 3.0)) and torch.equal(fast2.axpy(x, 3.0), x * 3 + 2)
    gch = [f for _, _, fs in os.walk(tmp_path / "fast" / "buildspeed" / "pch") for f in fs if f.endswith(".gch")]
    assert sorted(gch) == sorted([buildspeed.PCH_HEADER + ".gch", buildspeed.LIGHT_PCH_HEADER + ".gch"])  # made once
    recs = [r for r in buildcache.RECORDS if r["name"].startswith("km_bs_fast")]
    assert len({r["key"] for r in recs}) == 2 and all(r["compiled"] and not r["failed"] for r in recs)
    assert all(r["light_binding"] == "light_pch" for r in recs)  # light_binding is on by default


NN_CPP = CPP.replace("return", "(void)torch::nn::LinearOptions(2, 3); return")  # needs torch/all.h


@pytest.mark.slow
def test_real_cpu_build_with_light_binding_matches_plain(tmp_path, monkeypatch, have_cxx):
    """The light copy builds and computes what the plain build computes; a unit that uses
    torch::nn (not in the light headers) still builds, through the fallback."""
    import torch
    import torch.utils.cpp_extension as ce

    from rewards.harness import buildcache

    x = torch.arange(6.0)
    try:
        monkeypatch.setenv(buildspeed.SWITCHES_ENV, json.dumps(
            {"pch": False, "nvcc_threads": 0, "split_launchers": False, "light_binding": True}))
        buildcache.install(str(tmp_path / "light"), fast_build=False)
        light = ce.load_inline("km_bs_light", CPP, functions=["axpy"])
        nn = ce.load_inline("km_bs_light_nn", NN_CPP, functions=["axpy"])
    finally:
        ce.load_inline, ce.load = buildcache._ORIG, buildcache._ORIG_LOAD
    assert torch.equal(light.axpy(x, 3.0), x * 3 + 1) and torch.equal(nn.axpy(x, 3.0), x * 3 + 1)
    recs = {r["name"]: r.get("light_binding") for r in buildcache.RECORDS if r["name"].startswith("km_bs_light")}
    assert recs == {"km_bs_light": "light_binding", "km_bs_light_nn": "fallback:light_binding"}


# -- the launcher split (splitcu) ---------------------------------------------------------------
REAL_STYLE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#define TILE 16  // a macro both sides use
constexpr int kThreads = 256;
struct Pair { float a, b; };
__device__ __forceinline__ float relu(float v) { return v > 0.f ? v : 0.f; }
__global__ void __launch_bounds__(256) add_relu_kernel(const float* __restrict__ x, const float* y, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = relu(x[i] + y[i]);  // "<<<" in a comment or "string" is no launch
}
__global__ void tick_kernel() {}
static int blocks_for(int n) { return (n + kThreads - 1) / kThreads; }
torch::Tensor add_relu(torch::Tensor x, torch::Tensor y) {
    auto out = torch::empty_like(x);
    int n = x.numel();
    add_relu_kernel<<<blocks_for(n), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(), n);
    tick_kernel<<<1, 1>>>();
    return out;
}
"""


def test_split_moves_launchers_out_of_the_cu():
    from rewards.harness import splitcu

    cu, host = splitcu.split(REAL_STYLE)
    assert not re.search(r"\b(?:torch|at|ATen|c10)\b", cu)  # nvcc sees CUDA headers only
    assert "relu(float v)" in cu and "add_relu_kernel<<<km_g, km_b, km_s, km_st>>>(x, y, out, n)" in cu
    assert "const float* __restrict__ x, const float* y, float* out, int n)" in cu  # the kernel's own params
    assert "<<<" not in host and "__global__" not in host and "relu(float v)" not in host
    assert "__km_launch_add_relu_kernel(blocks_for(n), kThreads, 0, at::cuda::getCurrentCUDAStream()," in host
    assert "__km_launch_tick_kernel(1, 1, 0, 0)" in host
    for both in ("#define TILE 16", "constexpr int kThreads = 256", "struct Pair"):
        assert both in cu and both in host
    assert "#include <ATen/cuda/CUDAContext.h>" in host and "ATen" not in cu


@pytest.mark.parametrize("edit", [
    lambda s: s.replace("__global__ void tick_kernel() {}", "template <typename T> __global__ void tick_kernel() {}"),
    lambda s: s.replace("struct Pair { float a, b; };", "namespace km { struct Pair { float a, b; }; }"),
    lambda s: s.replace("#define TILE 16", "#ifdef USE_TILE\n#define TILE 16\n#endif"),
    lambda s: s.replace("int n = x.numel();", "int n = x.numel();\n#ifdef __CUDACC__\n n = 0;\n#endif"),
    lambda s: s.replace("tick_kernel<<<1, 1>>>();", "tick_kernel<<<1, 1>>>(); other_kernel<<<1, 1>>>();"),
    lambda s: s.replace("tick_kernel<<<1, 1>>>();", "cudaFuncSetAttribute(tick_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 0);"),
])
def test_split_declines_what_it_cannot_sort(edit):
    """Templated kernels (instances made in host code nvcc no longer sees), namespaces,
    conditional compilation, __CUDACC__ tests, launches of unknown kernels, kernels used as
    host symbols: the source is left as it is."""
    from rewards.harness import splitcu

    assert splitcu.split(REAL_STYLE) is not None  # the twin
    assert splitcu.split(edit(REAL_STYLE)) is None


def test_split_launchers_args(monkeypatch):
    args = {"name": "m", "cpp_sources": "torch::Tensor add_relu(torch::Tensor x, torch::Tensor y);",
            "cuda_sources": REAL_STYLE, "functions": ["add_relu"], "extra_cuda_cflags": ["-O3", "-DKM_X=1"],
            "extra_cflags": None, "no_implicit_headers": False}
    cfg = {"split_launchers": True}
    new = buildspeed.split_launchers(args, cfg)
    assert new["no_implicit_headers"] and new["cpp_sources"][0] == "#include <torch/extension.h>"  # the PCH's unit
    assert new["extra_cflags"] == [*buildspeed.NVCC_DEFS, "-DKM_X=1"] and new["functions"] == ["add_relu"]
    assert buildspeed.split_launchers(args, {"split_launchers": False}) is None
    assert buildspeed.split_launchers(args, None) is None
    bound_in_cu = {**args, "cuda_sources": REAL_STYLE + "PYBIND11_MODULE(m, x) {}"}
    assert buildspeed.split_launchers(bound_in_cu, cfg) is None


@pytest.mark.slow
def test_failing_split_falls_back_to_the_original(tmp_path, monkeypatch, have_cxx):
    """A split whose build fails (here: a rewrite that cannot compile) is followed by a build of
    the candidate's own source, which loads and computes; the record says so."""
    import torch
    import torch.utils.cpp_extension as ce

    from rewards.harness import buildcache

    broken = lambda args, cfg: {**args, "cpp_sources": [*buildspeed._as_list(args["cpp_sources"]), "this is not C++;"]}  # noqa: E731
    monkeypatch.setattr(buildspeed, "split_launchers", broken)
    monkeypatch.setenv(buildspeed.SWITCHES_ENV, json.dumps({"pch": False}))
    try:
        buildcache.install(str(tmp_path), fast_build=True)
        mod = ce.load_inline("km_bs_fallback", CPP, functions=["axpy"])
    finally:
        ce.load_inline, ce.load = buildcache._ORIG, buildcache._ORIG_LOAD
    assert torch.equal(mod.axpy(torch.ones(3), 2.0), torch.full((3,), 3.0))
    recs = [r for r in buildcache.RECORDS if r["name"] == "km_bs_fallback"]
    assert [r["fast_build"] for r in recs] == ["split_launchers", "fallback:split_launchers"]
    assert recs[0]["failed"] and not recs[1]["failed"]


@pytest.mark.gpu
@pytest.mark.slow
def test_split_build_computes_what_the_original_computes(tmp_path, monkeypatch):
    """On the GPU: REAL_STYLE built split (torch-free .cu, launchers in main.cpp with the PCH)
    and built as written give the same outputs, and the split build really was the split one."""
    import torch
    import torch.utils.cpp_extension as ce

    from rewards.harness import buildcache

    cpp = "torch::Tensor add_relu(torch::Tensor x, torch::Tensor y);"
    x, y = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
    out = {}
    try:
        for recipe, fast in (("orig", False), ("split", True)):
            if fast:
                monkeypatch.setenv(buildspeed.SWITCHES_ENV, json.dumps({"pch": True, "split_launchers": True}))
            else:
                monkeypatch.delenv(buildspeed.SWITCHES_ENV, raising=False)
            buildcache.install(str(tmp_path / recipe), fast_build=fast)
            mod = ce.load_inline(f"km_bs_{recipe}", cpp, REAL_STYLE, functions=["add_relu"])
            out[recipe] = mod.add_relu(x, y)
    finally:
        ce.load_inline, ce.load = buildcache._ORIG, buildcache._ORIG_LOAD
    torch.testing.assert_close(out["split"], out["orig"], rtol=0, atol=0)
    torch.testing.assert_close(out["orig"], torch.relu(x + y), rtol=0, atol=0)
    rec = [r for r in buildcache.RECORDS if r["name"] == "km_bs_split"]
    assert rec[-1]["fast_build"] == "split_launchers" and not rec[-1]["failed"]


def test_split_cache_key_follows_the_source():
    from rewards.harness.buildcache import build_key

    args = {"name": "m", "cpp_sources": "torch::Tensor add_relu(torch::Tensor x, torch::Tensor y);",
            "cuda_sources": REAL_STYLE, "functions": ["add_relu"]}
    a = buildspeed.split_launchers(args, {"split_launchers": True})
    b = buildspeed.split_launchers({**args, "cuda_sources": REAL_STYLE.replace("x[i] + y[i]", "x[i] - y[i]")},
                                   {"split_launchers": True})
    assert build_key(a) != build_key(b) and build_key(a) != build_key(args)
    assert build_key(a) == build_key(buildspeed.split_launchers(dict(args), {"split_launchers": True}))


def test_pch_flag_sets_cover_the_split_binding_unit():
    """A split binding unit compiles with the CUDA defines added to extra_cflags: the PCH made
    for it must have them too (on the H200, 22 of 24 split builds missed a PCH made without)."""
    from rewards.harness import pchwarm

    sets = pchwarm.flag_sets({"split_launchers": True}, [[], ["-O3"]])
    for cflags in ([], ["-O3"]):
        args = {"name": "m", "cpp_sources": "torch::Tensor add_relu(torch::Tensor x, torch::Tensor y);",
                "cuda_sources": REAL_STYLE, "functions": ["add_relu"], "extra_cuda_cflags": ["-O3", "--use_fast_math"],
                "extra_cflags": cflags, "no_implicit_headers": False}
        split = buildspeed.split_launchers(args, {"split_launchers": True})
        assert cflags in sets and split["extra_cflags"] in sets
    assert pchwarm.flag_sets({"split_launchers": False}, [[]]) == [[]]
