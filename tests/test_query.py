"""`python -m mining query`: SQL and canned queries over the store, table/CSV/JSON output."""

import csv
import io
import json
import subprocess
import sys

from test_store_synth import scores

from mining.stages.query_cmd import canned, run_query
from mining.store import Store


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "mining", "query", *args], capture_output=True,
                          text=True, timeout=120)


def test_canned_queries_give_hand_checked_numbers(tmp_path):
    st = Store(tmp_path)
    rows = scores(40)
    st.write("scores", rows)
    assert set(canned()) >= {"reward_by_skill", "hack_rate", "speedup_percentiles",
                             "best_per_task"}
    cols, out = run_query(st, "reward_by_skill")
    got = {(r[0], r[1], r[2]): dict(zip(cols, r, strict=True)) for r in out}
    grp = [r for r in rows if (r["skill"], r["round"], r["task_id"]) == (1, 0, "task0")]
    g = got[(1, 0, "task0")]
    assert g["n"] == len(grp)
    assert abs(g["reward_mean"] - sum(r["reward"] for r in grp) / len(grp)) < 1e-9
    cols, out = run_query(st, "hack_rate")
    rate = {r[0]: r[2] for r in out}
    assert rate["try_except_fallback"] == 4 / 40
    cols, out = run_query(st, "best_per_task")
    best = {r[0]: r[4] for r in out}
    for t in ("task0", "task1", "task2"):
        ok = [r["speedup"] for r in rows if r["task_id"] == t and r["correct"] and not r["major_hack"]]
        assert best[t] == max(ok)
    cols, out = run_query(st, "speedup_percentiles")
    assert [r[0] for r in out] == [1, 2]


def test_cli_formats_and_sql_with_equals(tmp_path):
    Store(tmp_path).write("scores", scores(12))
    root = f"store.root={tmp_path}"
    p = _cli("SELECT skill, count(*) AS n FROM scores WHERE skill = 1 GROUP BY skill", "--csv", root)
    assert p.returncode == 0, p.stderr
    assert list(csv.reader(io.StringIO(p.stdout))) == [["skill", "n"], ["1", "6"]]
    p = _cli("best_per_task", "store.format=json", root)
    assert p.returncode == 0, p.stderr
    assert {r["task_id"] for r in json.loads(p.stdout)} == {"task0", "task1", "task2"}
    p = _cli("hack_rate", root)
    assert p.returncode == 0 and "try_except_fallback" in p.stdout


def test_user_errors_are_one_sentence(tmp_path):
    p = _cli("SELECT nope FROM scores", f"store.root={tmp_path}")
    assert p.returncode == 2 and "query failed" in p.stderr and "Traceback" not in p.stderr
    p = _cli("no_such_query", f"store.root={tmp_path}")
    assert p.returncode == 2 and "no canned query 'no_such_query'" in p.stderr
    p = _cli("hack_rate", "--format", "xml", f"store.root={tmp_path}")
    assert p.returncode == 2 and "unknown output format" in p.stderr
