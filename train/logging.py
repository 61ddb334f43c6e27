"""Per-step training log: JSONL under <store root>/train/<run>.jsonl, and TensorBoard when installed."""

from __future__ import annotations

import json
import math
from pathlib import Path


class StepLog:
    def __init__(self, root: str | Path, run: str, tensorboard: bool = True) -> None:
        self.dir = Path(root).expanduser() / "train"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / f"{run}.jsonl"
        self._fh = open(self.path, "a", encoding="utf-8")
        self._tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
                self._tb = SummaryWriter(str(self.dir / "tb" / run))
            except ImportError:  # tensorboard not installed: JSONL only
                self._tb = None

    def write(self, step: int, record: dict) -> None:
        rec = {"step": step, **{k: (None if isinstance(v, float) and math.isnan(v) else v)
                                for k, v in record.items()}}
        self._fh.write(json.dumps(rec) + "\n")
        self._fh.flush()
        if self._tb is not None:
            for k, v in record.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool) and v is not None:
                    self._tb.add_scalar(f"train/{k}", v, step)

    def close(self) -> None:
        self._fh.close()
        if self._tb is not None:
            self._tb.close()

    def __enter__(self) -> StepLog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
