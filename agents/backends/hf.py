"""A local transformers model: chat template, batched generation, optional LoRA adapter (peft).

Requests wait up to ``batch_wait_s`` to join a batch of at most ``batch_size`` (requests with
equal sampling parameters batch together); ``generate`` runs in a worker thread so the event
loop keeps serving harness results meanwhile. The model loads on the first request.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from agents.backends.base import BackendError, Completion, Message, sampling_from


class HFBackend:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.path = str(cfg["path"])
        self.name = cfg.get("name") or self.path + (f"+{cfg['adapter']}" if cfg.get("adapter") else "")
        self.batch_size = int(cfg.get("batch_size", 8))
        self.batch_wait_s = float(cfg.get("batch_wait_s", 0.05))
        self._lock = threading.Lock()
        self._model = self._tok = None
        self._pending: dict[tuple, list[tuple[list[Message], asyncio.Future]]] = {}
        self._flushers: dict[tuple, asyncio.Task] = {}

    # -- loading -----------------------------------------------------------------------------
    def load(self):
        with self._lock:
            if self._model is not None:
                return self._model, self._tok
            try:
                import torch
                from transformers import AutoModelForCausalLM, AutoTokenizer
            except ImportError as e:
                raise BackendError(f"model=hf needs transformers and torch ({e})") from e
            dev = self.cfg.get("device", "auto")
            if dev == "auto":
                dev = "cuda" if torch.cuda.is_available() else "cpu"
            dtype = self.cfg.get("dtype", "auto")
            dtype = "auto" if dtype == "auto" else getattr(torch, dtype)
            try:
                tok = AutoTokenizer.from_pretrained(self.path)
                model = AutoModelForCausalLM.from_pretrained(self.path, dtype=dtype).to(dev)
            except OSError as e:
                raise BackendError(f"cannot load the model at {self.path}: pass model.path= a "
                                   "local model folder") from e
            if self.cfg.get("adapter"):
                from peft import PeftModel

                model = PeftModel.from_pretrained(model, str(self.cfg["adapter"]))
            model.eval()
            tok.padding_side = "left"
            if tok.pad_token is None:
                tok.pad_token = tok.eos_token
            self._model, self._tok = model, tok
            return model, tok

    # -- generation ------------------------------------------------------------------------
    def generate(self, batch: list[list[Message]], sampling: dict[str, Any]) -> list[Completion]:
        import torch

        model, tok = self.load()
        t0 = time.perf_counter()
        prompts = [tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True)
                   for m in batch]
        enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
        temp = float(sampling.get("temperature", 0.0))
        kw = {"max_new_tokens": int(sampling.get("max_tokens", 512)),
              "do_sample": temp > 0, "pad_token_id": tok.pad_token_id}
        if temp > 0:
            kw.update(temperature=temp, top_p=float(sampling.get("top_p", 1.0)))
        if sampling.get("seed") is not None:
            torch.manual_seed(int(sampling["seed"]))
        with torch.no_grad():
            out = model.generate(**enc, **kw)
        new = out[:, enc["input_ids"].shape[1]:]
        dt = time.perf_counter() - t0
        res = []
        for i in range(len(batch)):
            ids = new[i].tolist()
            n_prompt = int(enc["attention_mask"][i].sum())
            eos = tok.eos_token_id
            finish = "stop" if eos in ids else "length"
            if eos in ids:
                ids = ids[:ids.index(eos)]
            res.append(Completion(text=tok.decode(ids, skip_special_tokens=True),
                                  prompt_tokens=n_prompt, completion_tokens=len(ids),
                                  latency_s=dt, finish_reason=finish,
                                  extra={"batch": len(batch)}))
        return res

    async def chat(self, messages: list[Message], meta: dict[str, Any] | None = None,
                   **sampling: Any) -> Completion:
        s = sampling_from(self.cfg, sampling)
        key = tuple(sorted((k, repr(v)) for k, v in s.items() if k != "seed"))
        fut = asyncio.get_running_loop().create_future()
        self._pending.setdefault(key, []).append((messages, fut))
        if len(self._pending[key]) >= self.batch_size:
            self._flush(key, s)
        elif key not in self._flushers:
            self._flushers[key] = asyncio.create_task(self._later(key, s))
        return await fut

    async def _later(self, key, s) -> None:
        await asyncio.sleep(self.batch_wait_s)
        self._flushers.pop(key, None)
        self._flush(key, s)

    def _flush(self, key, s) -> None:
        items = self._pending.pop(key, [])
        if not items:
            return
        t = self._flushers.pop(key, None)
        if t and t is not asyncio.current_task():
            t.cancel()

        async def run():
            try:
                outs = await asyncio.to_thread(self.generate, [m for m, _ in items], s)
            except Exception as e:  # noqa: BLE001 - delivered to every waiting caller
                err = e if isinstance(e, BackendError) else BackendError(f"generation failed: {e}")
                for _, f in items:
                    if not f.done():
                        f.set_exception(err)
                return
            for (_, f), c in zip(items, outs, strict=True):
                if not f.done():
                    f.set_result(c)

        asyncio.create_task(run())

    async def aclose(self) -> None:
        self._model = None
