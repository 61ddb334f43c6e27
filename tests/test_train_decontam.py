"""`train` refuses (or, configured, warns about) prompts whose reference is a held-out eval task,
with the same held-out set and matching (exact and near-duplicate) as `split`."""

from __future__ import annotations

import json
import os

import pytest

from agents.tiny_model import build_tiny_model
from mining.cli import main
from mining.store import Store
from mining.tasks import load_suite


def reward(prompts, completions, meta):
    """Records which tasks were trained on (the file named by KM_TEST_SEEN); reward 0."""
    with open(os.environ["KM_TEST_SEEN"], "a") as f:
        f.writelines(m["task_id"] + "\n" for m in meta)
    return [0.0] * len(completions)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), hidden=32, layers=1, heads=2, vocab_size=300)


def _samples(root, held_src_variant: str):
    """Two samples on l3_05 (not held out) and one whose reference is a renamed copy of l3_01."""
    from skills.fingerprint import content_hash, structural_hash

    other = load_suite("level3", ids=["l3_05_se_resnet"], import_check=False).tasks[0]
    rows = [{"sample_id": f"o{i}", "skill": 1, "task_id": other.id, "run_id": "r",
             "reference_hash": other.hash, "reference_structural_hash": other.structural_hash,
             "messages_json": json.dumps([{"role": "user", "content": f"other {i}"}])} for i in range(2)]
    rows.append({"sample_id": "h", "skill": 1, "task_id": "l3_01_mlp", "run_id": "r",
                 "reference_hash": content_hash(held_src_variant),
                 "reference_structural_hash": structural_hash(held_src_variant),
                 "messages_json": json.dumps([{"role": "user", "content": "held-out copy"}])})
    Store(root).write("samples", rows)


def _train(tiny, root, seen, *extra):
    os.environ["KM_TEST_SEEN"] = str(seen)
    return main(["train", f"store.root={root}", f"train.model={tiny}", "task.holdout=[l3_01_mlp]",
                 "train.reward=tests.test_train_decontam:reward", "train.steps=1",
                 "train.group_size=2", "train.prompts_per_step=3", "train.grad_accum=1",
                 "train.max_completion_length=4", "train.device=cpu", "train.log.tensorboard=false",
                 "train.async_rewards=false", "run_id=dc", *extra])


def test_train_refuses_a_renamed_copy_of_a_held_out_task_and_warns_when_configured(tiny, tmp_path, capsys):
    held = load_suite("level3", ids=["l3_01_mlp"], import_check=False).tasks[0]
    renamed = held.source.replace("Model", "Net0").replace("x", "inp_")  # a near-duplicate
    _samples(tmp_path, renamed)
    seen = tmp_path / "seen.txt"
    assert _train(tiny, tmp_path, seen) == 0
    err = capsys.readouterr().err
    assert "1 samples refused" in err and "l3_01_mlp" in err
    trained = set(seen.read_text().split())
    assert trained == {"l3_05_se_resnet"}          # the held-out copy never reached the policy

    seen.unlink()
    assert _train(tiny, tmp_path / "w", seen, "train.decontam.on_match=warn") == 2  # empty store
    _samples(tmp_path / "w", renamed)
    assert _train(tiny, tmp_path / "w", seen, "train.decontam.on_match=warn") == 0
    assert "kept with a warning" in capsys.readouterr().err
    assert set(seen.read_text().split()) == {"l3_05_se_resnet", "l3_01_mlp"}


def test_train_on_held_out_tasks_only_is_one_sentence(tiny, tmp_path, capsys):
    seen = tmp_path / "seen.txt"
    # no samples: prompts rendered from the tasks, and the only task is held out
    assert _train(tiny, tmp_path, seen, "task.ids=[l3_01_mlp]", "train.prompts_from_tasks=true") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: every task to train on matches a held-out eval task (l3_01_mlp)")
    assert not seen.exists()
