"""`python -m mining score` end to end on CPU: real harness, real rewards, real Parquet."""

import subprocess
import sys

import pytest
from test_store_synth import turns

from mining.store import Store

GOOD = """import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self, in_features, hidden, depth, out_features):
        super().__init__()
        layers = []
        width = in_features
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), nn.GELU()]
            width = hidden
        layers.append(nn.Linear(width, out_features))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)
"""

BAD = GOOD.replace("return self.net(x)", "return self.net(x) * 0.0 + 1.0")


def store_to_score(root) -> tuple[Store, list[str]]:
    """A store whose turns hold one wrong (Skill 1) and one correct (Skill 2) program, and the
    overrides that score them quickly on the CPU harness."""
    rows = turns()
    rows[1]["code"], rows[3]["code"] = BAD, GOOD
    st = Store(root)
    st.write("turns", rows)
    return st, [f"store.root={root}", "harness.device=cpu", "harness.timed_calls=5",
                "harness.compile_baseline=false", "harness.profile=false"]


@pytest.mark.slow
def test_score_writes_one_row_per_sample_and_is_idempotent(tmp_path):
    st, common = store_to_score(tmp_path)
    common.append("store.score.batch_size=1")
    p = subprocess.run([sys.executable, "-m", "mining", "split", *common], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    cmd = [sys.executable, "-m", "mining", "score", *common]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr + p.stdout
    sc = st.read("scores").to_pylist()
    assert len(sc) == 2 and len(st.parts("scores")) == 2     # one part per batch: resumable
    by_skill = {r["skill"]: r for r in sc}
    assert by_skill[1]["correct"] is False and by_skill[1]["reward"] == 0.0
    assert by_skill[2]["correct"] is True and by_skill[2]["status"] == "ok"
    assert by_skill[2]["speedup"] is not None and by_skill[2]["reward_version"]
    assert all(r["run_id"] == "r1" and r["scorer_version"].startswith("h") for r in sc)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0 and "nothing to do" in p.stdout
    assert st.read("scores").num_rows == 2
    # a new scorer version (other reward config) scores every sample again, keeping the old rows
    p = subprocess.run(cmd + ["rewards.r_max=3.0"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert st.read("scores").num_rows == 4


def test_scorer_version_follows_verdict_settings_not_cache_or_workers():
    from mining.config import load_config
    from mining.stages.score_cmd import scorer_version

    base = scorer_version(load_config([]))
    # speed and isolation settings: the same verdicts, so the same version (no re-scoring)
    assert scorer_version(load_config(["harness.cache_dir=/elsewhere", "harness.resident=2",
                                       "harness.sandbox=off"])) == base
    # a verdict setting (correctness trials, tolerance) makes a new version
    assert scorer_version(load_config(["harness.trials=2"])) != base
    assert scorer_version(load_config(["harness.atol.float32=0.01"])) != base
