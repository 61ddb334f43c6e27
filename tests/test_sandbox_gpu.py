"""The sandbox on the GPU machine: a CUDA candidate runs, is timed and profiled under its own uid
in the mount view, and a candidate that tries to rewrite the cached baselines changes nothing.

    python -m pytest -q tests/test_sandbox_gpu.py tests/test_sandbox_attacks.py tests/test_sandbox_policy.py
"""

import hashlib
from pathlib import Path

import pytest

from mining.tasks import load_file
from rewards.harness import Evaluator

CANDS = Path(__file__).parent / "candidates"
pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def _hash(d: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(d.rglob("*.json")):
        h.update(p.read_bytes())
    return h.hexdigest()


def test_cuda_candidate_under_the_sandbox_and_a_baseline_rewrite_that_fails(tmp_path):
    task = load_file(CANDS / "tiny_task.py")
    cache = tmp_path / "cache"
    cfg = {"device": "cuda", "cache_dir": str(cache), "compile_baseline": False, "sandbox": "best"}
    honest = (CANDS / "cuda_gelu.py").read_text()
    with Evaluator(cfg) as ev:
        sb = ev._sandbox.evidence
        if sb["uid"] != "dedicated":
            pytest.skip(f"not root here: {sb}")
        first = ev.submit(task, honest).result()
        assert first.status == "ok", (first.error, first.log_tail)
        assert first.evidence["sandbox"]["missing"] == [], first.evidence["sandbox"]
        assert "profiling_error" not in first.evidence, first.evidence.get("profiling_error")
        before = _hash(cache / "baselines")
        attack = (CANDS / "py_probe.py").read_text().replace("        PROBE", (
            "        import glob\n"
            f"        for p in glob.glob({str(cache / 'baselines')!r} + '/*.json'):\n"
            "            try:\n                open(p, 'w').write('{\"ref_runtime_us\": 1e9}')\n"
            "            except OSError:\n                pass\n"
            "        assert torch.cuda.is_available()"))
        attack = attack.replace("import os\n", "import os\nimport torch\n")
        r = ev.submit(task, attack).result()
        assert r.status == "ok", (r.error, r.log_tail)
    assert _hash(cache / "baselines") == before
    with Evaluator(cfg) as ev:  # a fresh evaluator reads the baseline back from disk
        again = ev.submit(task, honest).result()
    assert again.status == "ok" and again.ref_runtime_us == first.ref_runtime_us
    print("sandbox evidence", first.evidence["sandbox"], "kernel profile",
          (first.evidence.get("kernel_profile") or {}).get("status"))
