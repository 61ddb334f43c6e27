"""`python -m mining split`: turns -> Skill 1 / Skill 2 samples with dedup, filters, provenance."""

import json
import subprocess
import sys

from test_store_synth import task, turns

from mining.stages.split_cmd import load_templates
from mining.store import Store
from skills.split import Reference, SplitOptions, code_hash, split_turns


def _refs():
    t = task()
    return {t.id: Reference(t.id, t.source, t.hash, t.structural_hash)}


def test_skill1_and_skill2_prompts_parent_links_and_negatives():
    rows, rep = split_turns(turns(), _refs(), load_templates(None), SplitOptions())
    by_skill = {r["skill"]: r for r in rows}
    assert set(by_skill) == {1, 2} and rep.dropped == {"malformed": 1}
    s1, s2 = by_skill[1], by_skill[2]
    m1 = json.loads(s1["messages_json"])
    assert [m["role"] for m in m1] == ["system", "user"]
    assert "class Model(" in m1[1]["content"] and "fuse linear+relu" in m1[1]["content"]
    assert "NVIDIA H200" in m1[1]["content"]
    assert s1["response"] == s1["code"] and "x * 1" in s1["code"] and s1["negative"] is True
    m2 = json.loads(s2["messages_json"])[1]["content"]
    assert "x * 1" in m2 and "scale is wrong" in m2            # previous code + feedback
    assert s2["parent_turn_id"] == "t1-1" and s2["negative"] is False
    assert s2["prev_code_hash"] == s1["code_hash"]
    for r in rows:   # provenance
        assert r["run_id"] == "r1" and r["gpu"] == "NVIDIA H200" and r["task_hash"] == task().hash
        assert r["reference_hash"] == task().hash


def test_dedup_by_normalized_code_and_filters():
    a = turns(traj="a")
    b = turns(traj="b")
    for t in b:   # same code, reformatted with a comment: a duplicate
        if t.get("code"):
            t["code"] = t["code"].replace("return x", "# scaled\n        return  x")
    assert code_hash(a[1]["code"]) == code_hash(b[1]["code"])
    rows, rep = split_turns(a + b, _refs(), load_templates(None), SplitOptions())
    assert len(rows) == 2 and rep.duplicates == 2
    rows, rep = split_turns(a, _refs(), load_templates(None), SplitOptions(keep_failures=False))
    assert [r["skill"] for r in rows] == [2] and rep.dropped["failure"] == 1
    rows, _ = split_turns(a, _refs(), load_templates(None), SplitOptions(skills=(1,)))
    assert [r["skill"] for r in rows] == [1]


def test_split_command_is_idempotent(tmp_path):
    Store(tmp_path).write("turns", turns())
    cmd = [sys.executable, "-m", "mining", "split", f"store.root={tmp_path}"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "2 new samples" in p.stdout
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert "0 new samples" in p.stdout and "2 already stored" in p.stdout
    assert Store(tmp_path).read("samples").num_rows == 2


def test_split_without_turns_is_one_clear_error(tmp_path):
    p = subprocess.run([sys.executable, "-m", "mining", "split", f"store.root={tmp_path}"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "no turns in" in p.stderr and "Traceback" not in p.stderr


def test_agents_layout_outcome_from_verifier_child_and_given_feedback():
    """agents/: revise -> previous coder turn; status/feedback live on the Verifier child."""
    rows = turns()
    rows[1]["status"], rows[3]["status"], rows[3]["speedup"] = None, None, None
    rows[3]["parent_turn_id"] = "t1-1"
    rows.append({**rows[2], "turn_id": "t1-5", "parent_turn_id": "t1-3", "status": "ok",
                 "speedup": 1.7, "feedback_json": json.dumps({"summary": "fast"})})
    rows[2]["status"] = "incorrect"
    rows.append({**rows[1], "turn_id": "t1-6", "action": "draft", "parent_turn_id": "t1-3",
                 "subtask_index": 1, "code": rows[1]["code"].replace("x * 1", "x * 3")})
    out, _ = split_turns(rows, _refs(), load_templates(None), SplitOptions())
    by_turn = {r["turn_id"]: r for r in out}
    assert by_turn["t1-1"]["negative"] is True and by_turn["t1-1"]["source_status"] == "incorrect"
    s2 = by_turn["t1-3"]
    assert s2["skill"] == 2 and s2["source_speedup"] == 1.7 and s2["negative"] is False
    assert "scale is wrong" in json.loads(s2["messages_json"])[1]["content"]
    assert by_turn["t1-6"]["skill"] == 1          # a draft of the next subtask is Skill 1
