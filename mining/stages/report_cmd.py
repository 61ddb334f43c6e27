"""``python -m mining report``: the HTML page and PNG plots under <root>/report."""

from __future__ import annotations

from mining.report import build


def main(cfg, args: list[str]) -> int:
    page = build(cfg.store.root, cfg.store.report.out, int(cfg.store.report.bins))
    print(f"report: {page}")
    return 0
