"""The common async interface every LLM backend implements.

``await backend.chat(messages, **sampling) -> Completion``. ``meta`` (role, task id, trajectory
id, call index) is passed by the agents for backends that key on it (replay) and ignored by the
others. Errors a user can cause (unreachable endpoint, missing package) raise ``BackendError``
with one sentence.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

Message = dict[str, str]


class BackendError(RuntimeError):
    """An LLM backend that cannot answer; the message is one sentence saying what to do."""


@dataclass
class Completion:
    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float = 0.0
    finish_reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Backend(Protocol):
    name: str  # the policy name recorded in provenance (model name + checkpoint)

    async def chat(self, messages: list[Message], meta: dict[str, Any] | None = None,
                   **sampling: Any) -> Completion: ...

    async def aclose(self) -> None: ...


SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "seed", "stop")


def sampling_from(cfg: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """The config's ``sampling`` block with per-call overrides on top (None values dropped)."""
    out = dict(cfg.get("sampling") or {})
    out.update(overrides)
    return {k: v for k, v in out.items() if v is not None}
