"""OpenAI-compatible chat completions over HTTP (vLLM serve, SGLang, transformers serve, APIs).

An ``httpx.AsyncClient`` posts to ``{base_url}/chat/completions``; a semaphore bounds the
requests in flight; 429, 5xx, timeouts and connection errors are retried with exponential
backoff (honouring ``Retry-After``); token usage comes from the response's ``usage``.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from typing import Any

import httpx

from agents.backends.base import BackendError, Completion, Message, sampling_from

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class OpenAIBackend:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.base_url = str(cfg["base_url"]).rstrip("/")
        self.model = str(cfg["model"])
        self.name = cfg.get("name") or self.model
        self.retries = int(cfg.get("retries", 4))
        self.backoff_s = float(cfg.get("backoff_s", 1.0))
        self.max_backoff_s = float(cfg.get("max_backoff_s", 30.0))
        self._sem = asyncio.Semaphore(int(cfg.get("concurrency", 16)))
        headers = {"content-type": "application/json"}
        key_env = cfg.get("api_key_env")
        if key_env and os.environ.get(key_env):
            headers["authorization"] = f"Bearer {os.environ[key_env]}"
        self._client = httpx.AsyncClient(
            base_url=self.base_url, headers=headers,
            timeout=httpx.Timeout(float(cfg.get("timeout_s", 600)),
                                  connect=float(cfg.get("connect_timeout_s", 10))))
        self.attempts = 0  # total HTTP attempts (for tests and usage accounting)

    def _delay(self, attempt: int, resp: httpx.Response | None) -> float:
        if resp is not None and resp.headers.get("retry-after"):
            try:
                return min(float(resp.headers["retry-after"]), self.max_backoff_s)
            except ValueError:
                pass
        base = min(self.backoff_s * 2 ** attempt, self.max_backoff_s)
        return base * (0.5 + random.random() / 2)

    async def chat(self, messages: list[Message], meta: dict[str, Any] | None = None,
                   **sampling: Any) -> Completion:
        body = {"model": self.model, "messages": messages, "stream": False,
                **sampling_from(self.cfg, sampling)}
        async with self._sem:
            t0 = time.perf_counter()
            last = ""
            for attempt in range(self.retries + 1):
                self.attempts += 1
                resp = None
                try:
                    resp = await self._client.post("/chat/completions", json=body)
                except (httpx.ConnectError, httpx.ConnectTimeout) as e:
                    last = f"cannot connect to {self.base_url} ({type(e).__name__})"
                except (httpx.TimeoutException, httpx.RemoteProtocolError,
                        httpx.ReadError) as e:
                    last = f"{self.base_url} did not answer in time ({type(e).__name__})"
                else:
                    if resp.status_code == 200:
                        return _parse(resp, time.perf_counter() - t0, attempt)
                    last = f"{self.base_url} answered HTTP {resp.status_code}: {resp.text[:200]}"
                    if resp.status_code not in RETRY_STATUS:
                        raise BackendError(last)
                if attempt < self.retries:
                    await asyncio.sleep(self._delay(attempt, resp))
        raise BackendError(f"{last}; gave up after {self.retries + 1} attempts "
                           "(check model.base_url and that the server is running)")

    async def aclose(self) -> None:
        await self._client.aclose()


def _parse(resp: httpx.Response, latency: float, attempt: int) -> Completion:
    try:
        data = resp.json()
        choice = data["choices"][0]
        text = choice["message"].get("content") or ""
    except (ValueError, KeyError, IndexError, TypeError) as e:
        raise BackendError(f"the endpoint's answer is not a chat completion ({e!r})") from e
    usage = data.get("usage") or {}
    return Completion(text=text, prompt_tokens=usage.get("prompt_tokens"),
                      completion_tokens=usage.get("completion_tokens"), latency_s=latency,
                      finish_reason=choice.get("finish_reason"),
                      extra={"retries": attempt, "id": data.get("id")})
