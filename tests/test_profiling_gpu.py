"""Two-level profiling end to end on the GPU: three embedded tasks' references and two candidates.

Run by scripts/gpu_capture_profiles.sh after the capture, sharing its caches (KM_PROFILE_CACHE),
so builds, baselines and ncu results are cache hits here.
"""

import os
from pathlib import Path

import pytest

from agents.feedback import make_feedback, render_feedback
from agents.profile_feedback import render_reference
from mining.tasks import load_suite

pytestmark = [pytest.mark.gpu, pytest.mark.slow]
SRC = Path(__file__).parent / "fixtures" / "replay" / "src" / "cuda_mlp.py"


@pytest.fixture(scope="module")
def run():
    from rewards.harness import Evaluator

    # the capture script's settings, so its builds, baselines and ncu results are cache hits
    cfg = {"device": "cuda", "compile_baseline": False, "timed_calls": 10, "trials": 3,
           "cache_dir": os.environ.get("KM_PROFILE_CACHE", "/tmp/km-prof-cache"),
           "profiling": {"kernel": {"min_share": 0.01}, "system": {"top": 100}}}  # every UNet op and module
    tasks = {t.id: t for t in load_suite("level3", ids=["l3_01_mlp", "l3_07_gpt_block", "l3_10_unet"]).tasks}
    with Evaluator(cfg) as ev:
        futs = {b: ev.submit(tasks["l3_01_mlp"], SRC.read_text().replace("BEHAVIOUR", b))
                for b in ("bias_gelu", "slow_bias_gelu")}
        refs = {tid: ev.reference_profile(t) for tid, t in tasks.items()}
        cands = {b: f.result() for b, f in futs.items()}
    return refs, cands


@pytest.mark.parametrize("tid", ["l3_01_mlp", "l3_07_gpt_block"])
def test_reference_system_profile(run, tid):
    sp = run[0][tid]["system"]
    top = sp["top_kernels"][0]
    assert top["op"] in ("aten::addmm", "aten::mm", "aten::bmm", "aten::linear")  # GEMMs dominate both
    assert sp["unattributed_gpu_events"] == 0 and sp["launches_per_forward"] >= 5
    assert sp["syncs_per_forward"] == 0 and not sp["copies"].get("HtoD_count")
    assert any(m["module"] != "<root>" for m in sp["modules"])
    assert render_reference(run[0][tid]).startswith("eager runtime")


def test_transposed_convolution_reference_is_profiled(run):
    """The UNet's ConvTranspose2d runs as aten::cudnn_convolution_transpose, whose arguments come
    in their own order: read as a convolution's, output_padding (0) was the stride, the estimate
    divided by it and the reference had no profile at all (H100, session 14)."""
    prof = run[0]["l3_10_unet"]
    assert "error" not in prof and prof["system"], prof.get("error")
    sp = prof["system"]
    assert sp["unattributed_gpu_events"] == 0 and sp["top_kernels"]
    ops = [o for o in sp["ops"] if "convolution_transpose" in o["op"]]  # costed by its own arguments
    assert ops and all(o["flops"] > 0 for o in ops), [o["op"] for o in sp["ops"]]
    ups = [m for m in sp["modules"] if m.get("type") == "ConvTranspose2d"]
    assert len(ups) == 3 and all(m["flops"] > 0 for m in ups), ups


def test_reference_kernel_profile_classifies_the_gemm(run):
    kp = run[0]["l3_01_mlp"]["kernel"]
    assert kp["status"] == "ok", kp.get("reason")
    top = max(kp["kernels"], key=lambda k: k.get("share") or 0)
    assert top["class"] == "compute-bound", top  # fp32 SGEMM 4096x2048x4096
    assert 0 < top["fraction_of_ceiling"] <= 1.05


@pytest.mark.parametrize("b", ["bias_gelu", "slow_bias_gelu"])
def test_candidate_profiles_and_feedback(run, b):
    r = run[1][b]
    assert r.status == "ok", (r.error, r.log_tail)
    ev = r.evidence
    sp, kp = ev["system_profile"], ev["kernel_profile"]
    assert any(k["origin"] == "candidate" for k in sp["top_kernels"])
    assert kp["status"] == "ok", kp.get("reason")
    fb = make_feedback(r.to_dict())
    txt = render_feedback(fb)
    assert fb["profile"]["target"]["share"] > 0 and "attack: " in txt and "ceiling: " in txt
    if b == "slow_bias_gelu":  # the epilogue in one block: it outweighs the GEMMs and fills ~1/132 of the GPU
        t = fb["profile"]["target"]
        assert t["base"] == "bias_gelu_one_block_kernel" and t["origin"] == "candidate", t
        assert t["class"] == "latency/launch-bound", t
