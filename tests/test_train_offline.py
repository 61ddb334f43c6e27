"""Offline (reward-weighted) mode: higher-reward stored responses become more likely."""

from __future__ import annotations

import json

import pytest
import torch

from agents.tiny_model import build_tiny_model
from mining.cli import main
from mining.store import Store
from train.loss import completion_logps
from train.offline import pairs_from_store


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), hidden=32, layers=1, heads=2, vocab_size=300)


def test_pairs_take_latest_score():
    samples = [{"sample_id": "a", "messages_json": json.dumps([{"role": "user", "content": "x"}]),
                "response": "r"}]
    scores = [{"sample_id": "a", "reward": 0.1, "scored_at": "2026-01-01"},
              {"sample_id": "a", "reward": 0.9, "scored_at": "2026-02-01"}]
    assert pairs_from_store(samples, scores) == [([{"role": "user", "content": "x"}], "r", 0.9)]


def _seq_logp(folder, base, prompt, resp):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base)
    m = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), folder).eval()
    p = tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
    pi = tok(p, return_tensors="pt", add_special_tokens=False)["input_ids"]
    ci = tok(resp, return_tensors="pt", add_special_tokens=False)["input_ids"]
    ids = torch.cat([pi, ci], 1)
    with torch.no_grad():
        lp, _ = completion_logps(m, ids, torch.ones_like(ids), ci.size(1))
    return float(lp.mean())


def test_offline_mode_prefers_high_reward(tiny, tmp_path):
    prompt = [{"role": "user", "content": "write relu"}]
    good, bad = "int add(int a, int b)", "class ModelNew forward"
    Store(tmp_path).write("samples", [
        {"sample_id": "g", "skill": 1, "task_id": "t", "run_id": "r", "response": good,
         "messages_json": json.dumps(prompt)},
        {"sample_id": "b", "skill": 1, "task_id": "t", "run_id": "r", "response": bad,
         "messages_json": json.dumps(prompt)}])
    Store(tmp_path).write("scores", [
        {"score_id": "1", "sample_id": "g", "reward": 2.0, "run_id": "r"},
        {"score_id": "2", "sample_id": "b", "reward": 0.0, "run_id": "r"}])
    assert main(["train", f"store.root={tmp_path}", f"train.model={tiny}", "train.mode=offline",
                 "train.steps=15", "train.lr=1e-2", "train.device=cpu", "train.prompts_per_step=1",
                 "train.group_size=2", "train.grad_accum=1", "train.log.tensorboard=false",
                 "run_id=off"]) == 0
    ck = Store(tmp_path).read("checkpoints").to_pylist()[0]
    trained = ck["adapter_path"]
    # compare against the untrained base: the good response gained, the bad one lost
    from transformers import AutoModelForCausalLM as M
    from transformers import AutoTokenizer as T

    tok, base = T.from_pretrained(tiny), M.from_pretrained(tiny).eval()

    def base_lp(resp):
        p = tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        pi = tok(p, return_tensors="pt", add_special_tokens=False)["input_ids"]
        ci = tok(resp, return_tensors="pt", add_special_tokens=False)["input_ids"]
        ids = torch.cat([pi, ci], 1)
        with torch.no_grad():
            return float(completion_logps(base, ids, torch.ones_like(ids), ci.size(1))[0].mean())

    assert _seq_logp(trained, tiny, prompt, good) > base_lp(good) + 0.2
    assert _seq_logp(trained, tiny, prompt, bad) < base_lp(bad) - 0.2
