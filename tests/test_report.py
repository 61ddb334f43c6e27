"""`python -m mining report`: an HTML page whose images exist, from a synthetic store."""

import json
import re
import subprocess
import sys

from test_store_synth import scores

from mining.report import build
from mining.store import Store


def test_report_page_and_pngs(tmp_path):
    st = Store(tmp_path)
    st.write("scores", scores(60))
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "r1.jsonl").write_text("\n".join(
        json.dumps({"step": i, "reward_mean": 0.1 * i, "kl": 0.01 * i}) for i in range(10)))
    page = build(tmp_path)
    text = page.read_text()
    imgs = re.findall(r'<img src="([^"]+)"', text)
    assert set(imgs) == {"reward_hist.png", "best_speedup.png", "hacks_by_round.png",
                         "training.png"}
    for name in imgs:
        assert (page.parent / name).read_bytes()[:4] == b"\x89PNG"
    assert "task0" in text and "try_except_fallback" in text


def test_report_on_empty_store_says_no_data(tmp_path):
    p = subprocess.run([sys.executable, "-m", "mining", "report", f"store.root={tmp_path}"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "no data yet" in (tmp_path / "report" / "index.html").read_text()
