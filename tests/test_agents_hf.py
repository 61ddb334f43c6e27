"""The local transformers backend on the tiny local model: batching, chat template, LoRA."""

import asyncio

import pytest

from agents.backends import BackendError, make_backend


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from agents.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny"))


def chat_many(b, n, **kw):
    async def go():
        return await asyncio.gather(*(b.chat([{"role": "user", "content": f"kernel {i}"}], **kw)
                                      for i in range(n)))
    return asyncio.run(go())


def test_concurrent_requests_are_generated_as_one_batch(tiny):
    b = make_backend({"backend": "hf", "path": str(tiny), "device": "cpu", "batch_size": 8,
                      "batch_wait_s": 0.2, "sampling": {"max_tokens": 6, "temperature": 0.0}})
    outs = chat_many(b, 3)
    assert [c.extra["batch"] for c in outs] == [3, 3, 3]
    assert all(0 < c.completion_tokens <= 6 and c.prompt_tokens > 3 for c in outs)
    # greedy decoding is deterministic: the same prompt gives the same text
    again = chat_many(b, 3)
    assert [c.text for c in outs] == [c.text for c in again]


def test_lora_adapter_is_applied(tiny, tmp_path):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny)
    peft_model = get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj", "v_proj"],
                                                 init_lora_weights=False))
    with torch.no_grad():
        for n, p in peft_model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 5.0)
    peft_model.save_pretrained(tmp_path / "lora")
    b = make_backend({"backend": "hf", "path": str(tiny), "adapter": str(tmp_path / "lora"),
                      "device": "cpu", "sampling": {"max_tokens": 4}})
    model, _ = b.load()
    from peft import PeftModel

    assert isinstance(model, PeftModel) and "+" in b.name
    assert chat_many(b, 1)[0].completion_tokens > 0


def test_missing_model_path_is_one_clear_error(tmp_path):
    b = make_backend({"backend": "hf", "path": str(tmp_path / "nope"), "device": "cpu"})
    with pytest.raises(BackendError, match="cannot load the model"):
        chat_many(b, 1)


def test_vllm_not_installed_is_one_clear_error():
    try:
        import vllm  # noqa: F401
        pytest.skip("vllm is installed here")
    except ImportError:
        pass
    with pytest.raises(BackendError, match="pip install vllm"):
        make_backend({"backend": "vllm", "path": "/models/x"})
