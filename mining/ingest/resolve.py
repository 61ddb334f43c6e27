"""Map each imported program to its task: a KernelBench level/problem id, a name, or a file."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

from mining.ingest.sources import Candidate
from mining.tasks import Task, load_dir, load_file, load_tasks
from rewards.harness.reference import ReferenceError_

_KB_REF = re.compile(r"^level_(\d+)_problem_(\d+)$")


class Resolver:
    """Tasks by KernelBench (level, problem) from ``task.root``, by name from the configured
    task set, or from a reference file. Loads each level and each reference file once."""

    def __init__(self, task_cfg: Any):
        self.cfg = task_cfg
        self._levels: dict[int, tuple[dict[int, Task], dict[int, str]]] = {}
        self._files: dict[str, Task | str] = {}
        self._named: list[Task] | None = None

    def __call__(self, c: Candidate) -> tuple[Task | None, str | None]:
        """(task, None) or (None, one sentence saying why there is none)."""
        if c.reference:
            return self._file(c.reference, c)
        m = _KB_REF.match(c.task_ref or "")
        if m or c.problem is not None:
            level = int(m.group(1)) if m else c.level
            prob = int(m.group(2)) if m else c.problem
            return self._kb(level, prob)
        return self._by_name(c.task_ref or "")

    def _kb(self, level: int | None, prob: int) -> tuple[Task | None, str | None]:
        if level is None:
            level = self.cfg.get("level")
        root = self.cfg.get("root") if self.cfg.get("kind") == "dir" else None
        if not root:
            return None, (f"unknown task id: level {level} problem {prob} needs a KernelBench "
                          "checkout (task=kernelbench task.root=<path>)")
        if level not in self._levels:
            try:
                rep = load_dir(root, level=int(level))
            except FileNotFoundError as e:
                rep = None
                self._levels[level] = ({}, {-1: str(e)})
            if rep is not None:
                bad = {}
                for err in rep.errors:  # "<path>: why." -> by problem number
                    m = re.match(r"(\d+)_", Path(err.split(": ", 1)[0]).name)
                    if m:
                        bad[int(m.group(1))] = err.rstrip(".")
                self._levels[level] = ({int(t.id.rsplit("_", 1)[1]): t for t in rep.tasks}, bad)
        tasks, bad = self._levels[level]
        if prob in tasks:
            return tasks[prob], None
        if prob in bad:
            return None, f"its reference does not load ({bad[prob]})"
        if -1 in bad:
            return None, f"unknown task id: level {level} problem {prob} ({bad[-1]})"
        return None, f"unknown task id: level {level} problem {prob} is not in {root}"

    def _file(self, path: str, c: Candidate) -> tuple[Task | None, str | None]:
        if path not in self._files:
            try:
                t = load_file(path)
                name = c.task_ref or Path(path).parent.name
                self._files[path] = dataclasses.replace(t, id=name, name=name)
            except (OSError, UnicodeDecodeError, ReferenceError_, ValueError) as e:
                self._files[path] = f"its reference {path} does not load ({str(e).rstrip('.')})"
        hit = self._files[path]
        return (hit, None) if isinstance(hit, Task) else (None, hit)

    def _by_name(self, ref: str) -> tuple[Task | None, str | None]:
        if self._named is None:
            try:
                self._named = load_tasks(self.cfg).tasks
            except (FileNotFoundError, ValueError):
                self._named = []
        for t in self._named:
            stem = Path(t.path).stem if t.path else None
            if ref in (t.id, t.name, stem) or (ref.isdigit() and t.id.split("_")[-1] == ref):
                return t, None
        return None, (f"unknown task id {ref!r}: no task of the configured task set has that id, "
                      "name or number, and no reference.py lies beside it")
