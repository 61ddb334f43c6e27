"""Build a tiny causal LM with a locally trained tokenizer (tests, demos, the GPU cycle check).

Nothing is downloaded: the tokenizer is a byte-level BPE trained on text given here (by default
the embedded task sources plus a CUDA snippet corpus), the model a randomly initialised Qwen2
config. The result is an ordinary Hugging Face model folder, loaded by the same code that loads
a real model: ``AutoModelForCausalLM.from_pretrained(path)``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

_CUDA_TEXT = """
```python
import torch
from torch.utils.cpp_extension import load_inline
cuda_src = '''
__global__ void relu_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
'''
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return ext.relu(x)
```
int add(int a, int b) { return a + b; }  long mul(long a, long b) { return a * b; }
"""


def default_corpus() -> list[str]:
    texts = [_CUDA_TEXT] * 4
    suites = Path(__file__).resolve().parent.parent / "mining" / "suites"
    texts += [p.read_text() for p in sorted(suites.rglob("*.py"))]
    return texts


def build_tokenizer(texts: Iterable[str], vocab_size: int = 1024):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(list(texts), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", bos_token=None)
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_model(out_dir: str | Path, texts: Iterable[str] | None = None,
                     hidden: int = 64, layers: int = 2, heads: int = 4, vocab_size: int = 1024,
                     seed: int = 0) -> Path:
    """Write a tokenizer and a random tiny Qwen2 model to ``out_dir``; returns the path."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(texts if texts is not None else default_corpus(), vocab_size)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=hidden, intermediate_size=hidden * 4,
                      num_hidden_layers=layers, num_attention_heads=heads,
                      num_key_value_heads=heads, max_position_embeddings=4096,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                      tie_word_embeddings=True)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


if __name__ == "__main__":  # python -m agents.tiny_model /tmp/tiny
    import sys

    print(build_tiny_model(sys.argv[1] if len(sys.argv) > 1 else "tiny-model"))
