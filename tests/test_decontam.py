"""Decontamination: held-out references refused (or flagged) exactly and as near-duplicates."""

import subprocess
import sys

from test_store_synth import task, turns

from mining.store import Store
from skills.decontam import Holdout, decontaminate
from skills.fingerprint import content_hash, structural_hash

RENAMED = """
import torch
import torch.nn as nn

HIDDEN_LAYERS = [64, 32]
OUT = 10
IN = 128
N = 8

class Net(nn.Module):
    def __init__(self, a, b, c):
        super().__init__()
        self.w = nn.Linear(a, c)

    def forward(self, inp):
        return torch.relu(self.w(inp))
"""


def _holdout(src, tid="held"):
    return Holdout.from_hashes([(tid, content_hash(src), structural_hash(src))])


def test_exact_match_refused_and_warn_mode_flags():
    t = task()
    row = {"reference_hash": t.hash, "reference_structural_hash": t.structural_hash}
    kept, rep = decontaminate([row], _holdout(t.source))
    assert kept == [] and rep.refused == 1
    kept, rep = decontaminate([row], _holdout(t.source), mode="warn")
    assert kept[0]["contamination"] == "exact" and rep.flagged == 1


def test_renamed_and_reordered_reference_is_a_near_duplicate():
    t = task()
    src = t.source
    # rename every user identifier and reverse the order of the module constants
    renamed = src.replace("Model", "Net0").replace("x", "inp_")
    lines = src.splitlines()
    consts = [i for i, ln in enumerate(lines) if ln and ln.split(" = ")[0].isupper() and " = " in ln]
    if len(consts) > 1:
        block = [lines[i] for i in consts]
        for i, ln in zip(consts, reversed(block), strict=True):
            lines[i] = ln
    reordered = "\n".join(lines).replace("Model", "Net0")
    for variant in (renamed, reordered):
        assert content_hash(variant) != t.hash
        row = {"reference_hash": content_hash(variant),
               "reference_structural_hash": structural_hash(variant)}
        kept, rep = decontaminate([row], _holdout(src, "l3_01_mlp"))
        assert kept == [] and rep.matches == {"l3_01_mlp": 1}, variant
        kept, _ = decontaminate([row], _holdout(src), structural=False)
        assert len(kept) == 1     # exact-only matching misses it: structural is what catches it
    other = {"reference_hash": content_hash(RENAMED), "reference_structural_hash": structural_hash(RENAMED)}
    assert decontaminate([other], _holdout(src))[0] == [other]


def _split(root, *over):
    return subprocess.run([sys.executable, "-m", "mining", "split", f"store.root={root}", *over],
                          capture_output=True, text=True, timeout=120)


def test_split_refuses_holdout_task_and_warns_when_configured(tmp_path):
    Store(tmp_path).write("turns", turns())
    p = _split(tmp_path, "task.holdout=[l3_01_mlp]")
    assert p.returncode == 0, p.stderr
    assert "0 new samples" in p.stdout and "refused" in p.stderr and "l3_01_mlp" in p.stderr
    p = _split(tmp_path, "task.holdout=[l3_01_mlp]", "split.decontam.on_match=warn")
    assert "2 new samples" in p.stdout and "warning" in p.stderr
    assert set(Store(tmp_path).read("samples").column("contamination").to_pylist()) == {"exact"}


def test_split_refuses_references_in_a_holdout_dir(tmp_path):
    Store(tmp_path / "data").write("turns", turns())
    hd = tmp_path / "held"
    hd.mkdir()
    (hd / "mlp_copy.py").write_text("# a reformatted copy\n" + task().source.replace("Model", "M"))
    p = _split(tmp_path / "data", f"split.decontam.holdout_dir={hd}")
    assert p.returncode == 0, p.stderr
    assert "0 new samples" in p.stdout and "mlp_copy" in p.stderr
    p = _split(tmp_path / "data", "task.holdout=[nope]")
    assert p.returncode == 2 and "unknown task id" in p.stderr
