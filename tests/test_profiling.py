"""Two-level profiling on recorded outputs: torch.profiler event tables and ncu CSV.

The fixtures in tests/fixtures/profiles/ (``sysprof_events.json``, ``ncu_raw.json``) are either
captured on the GPU machine (scripts/gpu_capture_profiles.sh) or the synthetic stand-ins written
by synth.py; ``meta.source`` says which. Tests keyed on physics (a GEMM is compute-bound, an
elementwise kernel memory-bound) hold for both; the synthetic-only cases are built in the test.
"""

import asyncio
import doctest
import importlib.util
import json
import os
from pathlib import Path

import pytest

from agents import feedback, profile_feedback
from agents.verifier import Verifier
from rewards.harness import ncuprof, opcost, profcfg, sysprof
from rewards.harness.config import HarnessConfig

HERE = Path(__file__).parent / "fixtures" / "profiles"
FIX = Path(os.environ.get("KM_PROFILE_FIXTURES") or HERE)  # the GPU script points this at fresh captures
CEIL = {"bandwidth_Bps": 4.3e12, "peak_flops": {"float32": 6.0e13}}
KCFG = profcfg.DEFAULTS["kernel"]
EVENTS = json.loads((FIX / "sysprof_events.json").read_text())
NCU = json.loads((FIX / "ncu_raw.json").read_text())
_spec = importlib.util.spec_from_file_location("profiles_synth", HERE / "synth.py")
synth = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(synth)


def summary(name):
    c = EVENTS["cases"][name]
    return sysprof.summarize(c["events"], c["calls"], c["modules"], c["declared"], ceilings=CEIL)


def ncu_result(name, sp):
    return ncuprof.result_from_csv(NCU["cases"][name]["csv"], ncuprof.select(sp["top_kernels"], KCFG),
                                   KCFG["thresholds"], {"bandwidth_Bps": 4.3e12, "peak_flops": {"float32": 6.0e13}},
                                   "float32")


def is_gemm(k):
    return any(s in (k.get("label") or k.get("base") or "").lower() for s in ("gemm", "sm90", "sm80", "xmma"))


@pytest.mark.parametrize("mod", [opcost, sysprof, profcfg])
def test_doctests(mod):
    r = doctest.testmod(mod)
    assert r.attempted > 0 and r.failed == 0


def test_conv_cost_by_hand():
    # N=2, C=8, 16x16, O=4, 3x3, stride 2, padding 1 -> 8x8 output
    e = opcost.estimate("aten::cudnn_convolution", [[2, 8, 16, 16], [4, 8, 3, 3], [], [], [], []],
                        ["float", "float", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
                        ["", "", "[1, 1]", "[2, 2]", "[1, 1]", "1"])
    assert e["flops"] == 2 * (2 * 4 * 8 * 8) * 8 * 9
    assert e["bytes"] == (2 * 8 * 16 * 16 + 4 * 8 * 9 + 2 * 4 * 8 * 8) * 4


@pytest.mark.parametrize("name", sorted(EVENTS["cases"]))
def test_summary_invariants(name):
    s = summary(name)
    ks = s["top_kernels"]
    assert ks and [k["time_us"] for k in ks] == sorted((k["time_us"] for k in ks), reverse=True)
    assert sum(k["share"] for k in ks) == pytest.approx(1 - s["other_share"])
    assert not any(sysprof.MARKER_KERNEL in k["name"] for k in ks)  # the timing marker is not work
    assert s["unattributed_gpu_events"] == 0  # every kernel maps to a forward through its launch
    assert s["kernels_per_forward"] >= 1 and s["launches_per_forward"] >= s["kernels_per_forward"] * 0.9
    assert 0 <= s["gpu_idle_fraction"] < 1 and s["gpu_busy_us"] <= s["gpu_span_us"] + 1e-6
    assert s["cpu_us_per_forward"] > 0
    json.dumps(s)  # a plain record


def test_reference_mlp_maps_kernels_to_ops_and_modules():
    s = summary("ref:l3_01_mlp")
    top = s["top_kernels"][0]
    assert top["op"] in ("aten::addmm", "aten::mm", "aten::linear") and top["share"] > 0.5
    assert top["module"].startswith("net.")
    gelu = [k for k in s["top_kernels"] if k["op"] == "aten::gelu"]
    assert gelu and all(k["module"].startswith("net.") for k in gelu)
    addmm = next(o for o in s["ops"] if o["op"] in ("aten::addmm", "aten::mm"))
    assert addmm["bound"] == "compute" and addmm["ceiling_us"] < addmm["time_us"]  # no kernel beats its roofline
    assert next(o for o in s["ops"] if o["op"] == "aten::gelu")["bound"] == "memory"


def test_reference_gpt_block_when_captured():
    if "ref:l3_07_gpt_block" not in EVENTS["cases"]:
        pytest.skip("the GPT block profile comes from the GPU capture (scripts/gpu_capture_profiles.sh)")
    s = summary("ref:l3_07_gpt_block")
    mods = {m["module"] for m in s["modules"]}
    assert any(m.startswith("blocks.0") for m in mods)
    assert any(k["op"] in ("aten::addmm", "aten::mm", "aten::bmm") for k in s["top_kernels"][:3])


def test_candidate_kernels_are_attributed():
    s = summary("cand:mlp_bias_gelu")
    origins = {k["base"]: k["origin"] for k in s["top_kernels"]}
    assert origins["bias_gelu_kernel"] == "candidate"
    assert "library" in origins.values()


def test_host_copies_syncs_and_gaps_are_counted():
    name, c = synth.mlp_cand("naive", calls=2)  # synthetic: one pageable H2D copy + a stream sync per forward
    s = sysprof.summarize(c["events"], c["calls"], c["modules"], c["declared"], ceilings=CEIL)
    assert s["copies"]["HtoD_count"] == 1 and s["copies"]["HtoD_bytes"] == 4
    assert s["syncs_per_forward"] == 1 and s["sync_calls"] == ["cudaStreamSynchronize"]
    assert s["idle_gaps_over_threshold"] >= 1
    rec = profile_feedback.diagnose({"system_profile": s})
    assert any("host-to-device" in i for i in rec["host_issues"])
    assert any("synchronisation" in i for i in rec["host_issues"])


def test_cpu_bound_forward_is_flagged():
    tr = synth.Trace()
    layers = [(f"l{i}", "ReLU", "aten::relu", [[64]], ["float"], "relu_kernel", 1.0) for i in range(20)]
    synth.forward(tr, layers)
    s = sysprof.summarize(tr.ev, 1)
    assert s["cpu_bound"] and s["gpu_idle_fraction"] > 0.5 and s["launches_per_forward"] == 20
    rec = profile_feedback.diagnose({"system_profile": s})
    assert any("host-bound" in i for i in rec["host_issues"]) and any("idle" in i for i in rec["host_issues"])


@pytest.mark.parametrize("name", sorted(NCU["cases"]))
def test_ncu_csv_parses(name):
    rows = ncuprof.parse_csv(NCU["cases"][name]["csv"])
    assert rows and all(r["duration_ns"] > 0 and r["name"] for r in rows)
    assert all(0 <= r["sm_pct"] <= 100 and 0 <= r["dram_pct"] <= 100 for r in rows)
    agg = ncuprof.aggregate(rows)
    assert sum(a["launches"] for a in agg) == len(rows)


def test_ncu_classes_follow_the_physics():
    got = {}
    for name in ("ref:l3_01_mlp", "cand:mlp_bias_gelu"):
        for a in ncuprof.aggregate(ncuprof.parse_csv(NCU["cases"][name]["csv"])):
            got[a["base"]] = ncuprof.classify(a, KCFG["thresholds"], 4.3e12, 6.0e13)
    gemm = [v for k, v in got.items() if "gemm" in k.lower() or k.startswith(("sm90", "sm80", "Kernel"))]
    elem = [v for k, v in got.items() if "elementwise" in k or "gelu" in k]
    assert gemm and all(v["class"] == "compute-bound" for v in gemm)
    assert elem and all(v["class"] == "memory-bound" for v in elem)
    assert all(v["fraction_of_ceiling"] <= 1.05 for v in got.values() if v.get("fraction_of_ceiling"))


def test_naive_gemm_is_far_below_its_roofline():
    a = [x for x in ncuprof.aggregate(ncuprof.parse_csv(NCU["cases"]["cand:mlp_naive"]["csv"]))
         if x["base"] == "naive_gemm_kernel"][0]
    c = ncuprof.classify(a, KCFG["thresholds"], 4.3e12, 6.0e13)
    assert c["fraction_of_ceiling"] < 0.5


def test_spills_and_short_kernels():
    a = ncuprof.aggregate(ncuprof.parse_csv(synth.ncu_csv([("k", [3100, 12.0, 14.0, 9.0, 18.0, 255, 4000, 4000,
                                                                   81920, 0, 1000])])))[0]
    c = ncuprof.classify(a, KCFG["thresholds"], 4.3e12, 6.0e13)
    assert c["spills"] and c["local_bytes"] == 81920 and c["class"] == "latency/launch-bound"
    assert "too short" in c["why"]


def test_ncu_failure_output_is_a_record_not_an_exception():
    r = ncuprof.result_from_csv("==ERROR== The application returned an error code (1).\n", [], {}, CEIL, "float32")
    assert r["status"] == "failed" and "ERROR" in r["reason"]


def test_ncu_command_is_bounded():
    cmd = ncuprof.command("ncu", ["bias_gelu_kernel", "Kernel2"], 4, "/tmp/job.json")
    assert cmd[cmd.index("--clock-control") + 1] == "none" and cmd[cmd.index("--launch-count") + 1] == "4"
    assert "--profile-from-start" in cmd and any("bias_gelu_kernel" in c for c in cmd)
    sel = ncuprof.select([{"base": "a", "share": 0.9, "mean_us": 100, "calls": 1, "time_us": 100},
                          {"base": "b", "share": 0.01, "mean_us": 100, "calls": 1, "time_us": 1},
                          {"base": "c", "share": 0.3, "mean_us": 1.0, "calls": 1, "time_us": 30}], KCFG)
    assert [k["base"] for k in sel] == ["a"]  # under share or per-launch time thresholds: not replayed


def test_ncu_unavailable_is_reported(tmp_path):
    r = ncuprof.profile({"kind": "reference"}, [{"base": "a", "share": 0.9, "mean_us": 100, "calls": 1, "time_us": 100}],
                        {**KCFG, "ncu": "/nonexistent/ncu"}, CEIL, "float32", str(tmp_path))
    assert r["status"] == "unavailable"


def candidate_evidence(name):
    sp = summary(name)
    return {"system_profile": sp, "kernel_profile": ncu_result(name, sp),
            "ref_system_profile": summary("ref:l3_01_mlp"), "physical_floor_us": 9000.0}


def test_feedback_names_the_kernel_why_and_ceiling():
    ev = candidate_evidence("cand:mlp_naive")
    rec = profile_feedback.diagnose(ev, runtime_us=ev["system_profile"]["gpu_span_us"])
    assert rec["target"]["base"] == "naive_gemm_kernel" and rec["target"]["origin"] == "candidate"
    assert rec["target"]["class"] in ("memory-bound", "latency/launch-bound", "compute-bound")
    # the hand-written GEMM has no aten op: its region's work comes from the reference's matching module
    assert rec["region"]["flops"] >= 0.9 * summary("ref:l3_01_mlp")["modules"][0]["flops"]
    text = profile_feedback.render(rec)
    assert text.startswith("attack: naive_gemm_kernel (candidate")
    assert "why: " in text and "ceiling: " in text and "do: " in text
    json.dumps(rec)


def test_verifier_feedback_carries_the_profile_record_and_text():
    ev = candidate_evidence("cand:mlp_bias_gelu")
    fb = feedback.make_feedback({"status": "ok", "speedup": 1.02, "runtime_us": 16000.0, "evidence": ev})
    assert fb["profile"]["target"]["share"] > 0.1
    txt = feedback.render_feedback(fb)
    assert "attack: " in txt and "ceiling: " in txt


def test_planner_text_from_reference_profile():
    prof = {"ref_runtime_us": 16100.0, "system": summary("ref:l3_01_mlp"),
            "kernel": ncu_result("ref:l3_01_mlp", summary("ref:l3_01_mlp"))}
    txt = profile_feedback.render_reference(prof)
    assert "top kernels" in txt and "aten::gelu" in txt and "net." in txt and "compute-bound" in txt
    assert profile_feedback.render_reference({"system": None}) is None
    assert feedback.profile_text({"ref_runtime_us": 1.0, "evidence": {"ref_system_profile": prof["system"]}}).startswith("eager")


def test_verifier_gives_planner_the_reference_profile_and_survives_failure():
    prof = {"ref_runtime_us": 16100.0, "system": summary("ref:l3_01_mlp")}

    async def good(task):
        return prof

    async def bad(task):
        raise RuntimeError("GPU gone")

    assert "top kernels" in asyncio.run(Verifier(None, reference_profile=good).reference_profile("t"))
    assert asyncio.run(Verifier(None, reference_profile=bad).reference_profile("t")) is None
    assert asyncio.run(Verifier(None).reference_profile("t")) is None


def test_profiling_config_levels_and_budgets():
    c = HarnessConfig.from_mapping({"profiling": {"kernel": {"enabled": False, "timeout_s": 10}}})
    assert c.profiling["kernel"]["enabled"] is False and c.profiling["kernel"]["top_k"] == 3
    assert c.profiling["system"]["enabled"] is True
    with pytest.raises(ValueError, match="harness.profiling.system.topp"):
        HarnessConfig.from_mapping({"profiling": {"system": {"topp": 1}}})
