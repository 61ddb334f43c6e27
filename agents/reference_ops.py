"""The operators a reference model is built from (on the meta device; nothing allocated)."""

from __future__ import annotations

import contextlib
import io
from collections import Counter


def reference_ops(source: str) -> list[str]:
    """Leaf module types in construction order, with counts, e.g. ``['Linear x3', 'GELU x2']``.

    Returns ``[]`` when the reference cannot be instantiated on the meta device.
    """
    try:

        from rewards.harness.reference import load_module, meta_device

        with contextlib.redirect_stdout(io.StringIO()):
            mod = load_module(source, name="reference_ops")
            with meta_device():
                model = mod.Model(*mod.get_init_inputs())
    except Exception:  # noqa: BLE001 - a summary, never fatal
        return []
    counts = Counter(type(m).__name__ for m in model.modules()
                     if not list(m.children()) and type(m).__name__ != "Model")
    if not counts:
        return ["forward (functional ops only)"]
    return [f"{name} x{n}" if n > 1 else name for name, n in counts.items()]
