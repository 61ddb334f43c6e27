"""vLLM's offline engine with optional LoRA adapters. Imported only when ``model=vllm``.

``generate`` is blocking and batches internally; each call runs in a worker thread and calls
calls are serialised (the engine is not thread-safe); use model=openai against
`vllm serve` for continuous batching across trajectories.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from agents.backends.base import BackendError, Completion, Message, sampling_from


class VLLMBackend:
    def __init__(self, cfg: dict[str, Any]) -> None:
        try:
            import vllm  # noqa: F401
        except ImportError as e:
            raise BackendError("model=vllm needs vLLM, which is not installed here: pip install "
                               "vllm, or serve the model with `vllm serve` and use model=openai") from e
        self.cfg = cfg
        self.name = cfg.get("name") or str(cfg["path"]) + (f"+{cfg['adapter']}" if cfg.get("adapter") else "")
        self._llm = None
        self._lock = threading.Lock()
        self._gen_lock = threading.Lock()  # the offline engine is not thread-safe

    def load(self):
        with self._lock:
            if self._llm is None:
                from vllm import LLM

                c = self.cfg
                self._llm = LLM(model=str(c["path"]), enable_lora=bool(c.get("adapter")),
                                max_lora_rank=int(c.get("max_lora_rank", 64)),
                                tensor_parallel_size=int(c.get("tensor_parallel_size", 1)),
                                gpu_memory_utilization=float(c.get("gpu_memory_utilization", 0.85)),
                                max_model_len=int(c.get("max_model_len", 32768)))
            return self._llm

    def generate(self, messages: list[Message], s: dict[str, Any]) -> Completion:
        from vllm import SamplingParams

        llm = self.load()
        lora = None
        if self.cfg.get("adapter"):
            from vllm.lora.request import LoRARequest

            lora = LoRARequest("adapter", 1, str(self.cfg["adapter"]))
        params = SamplingParams(temperature=float(s.get("temperature", 0.0)),
                                top_p=float(s.get("top_p", 1.0)),
                                max_tokens=int(s.get("max_tokens", 1024)), seed=s.get("seed"))
        t0 = time.perf_counter()
        with self._gen_lock:
            out = llm.chat([messages], params, lora_request=lora, use_tqdm=False)[0]
        o = out.outputs[0]
        return Completion(text=o.text, prompt_tokens=len(out.prompt_token_ids or []),
                          completion_tokens=len(o.token_ids), latency_s=time.perf_counter() - t0,
                          finish_reason=o.finish_reason)

    async def chat(self, messages: list[Message], meta: dict[str, Any] | None = None,
                   **sampling: Any) -> Completion:
        return await asyncio.to_thread(self.generate, messages, sampling_from(self.cfg, sampling))

    async def aclose(self) -> None:
        self._llm = None
