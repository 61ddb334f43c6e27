"""Tasks: KernelBench-format reference sources plus metadata, from the embedded suite or a directory.

A task's identity is the content hash of its normalized source (``skills.fingerprint``), so a
reformatted copy of a file is the same task everywhere, from trajectories to decontamination.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rewards.harness.reference import ReferenceError_, check_format, load_module
from skills.fingerprint import content_hash, structural_hash

SUITES_DIR = Path(__file__).parent / "suites"

# Keyword -> family, for directories that carry no manifest (a KernelBench checkout).
_FAMILY_KEYWORDS = [
    ("mamba", "ssm"), ("ssm", "ssm"), ("scan", "ssm"),
    ("lstm", "rnn"), ("gru", "rnn"), ("rnn", "rnn"),
    ("gpt", "transformer"), ("attention", "attention"), ("vit", "transformer"),
    ("swin", "transformer"), ("transformer", "transformer"),
    ("unet", "unet"), ("densenet", "densenet"), ("dense", "densenet"),
    ("mobilenet", "mobilenet"), ("efficientnet", "mobilenet"), ("shufflenet", "mobilenet"),
    ("squeeze", "se"), ("resnet", "resnet"), ("resnext", "resnet"), ("regnet", "resnet"),
    ("vgg", "cnn"), ("alexnet", "cnn"), ("lenet", "cnn"), ("googlenet", "cnn"),
    ("netvlad", "vlad"), ("mlp", "mlp"),
]


@dataclass(frozen=True)
class Task:
    id: str
    name: str
    level: int
    family: str
    source: str
    path: str | None = None
    # Module-level constant overrides that shrink the task for CPU runs (harness only).
    small: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    @functools.cached_property
    def hash(self) -> str:
        return content_hash(self.source)

    @functools.cached_property
    def structural_hash(self) -> str:
        return structural_hash(self.source)

    def record(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "level": self.level, "family": self.family,
                "hash": self.hash, "path": self.path}


@dataclass
class LoadReport:
    tasks: list[Task]
    errors: list[str]  # one sentence per bad file


def guess_family(name: str) -> str:
    low = name.lower()
    for key, fam in _FAMILY_KEYWORDS:
        if key in low:
            return fam
    return "other"


def _validate(path: Path, source: str, import_check: bool) -> str | None:
    problem = check_format(source)
    if problem is None and import_check:
        try:
            load_module(source, name=path.stem)
        except ReferenceError_ as e:
            problem = str(e)
    return None if problem is None else f"{path}: {problem}."


def _select(tasks: list[Task], ids: list[str] | None, names: list[str] | None) -> list[Task]:
    if ids:
        want = {str(i) for i in ids}
        tasks = [t for t in tasks if t.id in want or t.id.split("_")[-1] in want]
    if names:
        pats = [n.lower() for n in names]
        tasks = [t for t in tasks if any(p in t.name.lower() for p in pats)]
    return tasks


def load_suite(
    name: str, ids: list[str] | None = None, names: list[str] | None = None,
    import_check: bool = True,
) -> LoadReport:
    """The embedded suite ``name`` (a folder under ``mining/suites`` with a ``suite.yaml``)."""
    root = SUITES_DIR / name
    manifest = root / "suite.yaml"
    if not manifest.is_file():
        known = sorted(p.name for p in SUITES_DIR.iterdir() if (p / "suite.yaml").is_file())
        raise FileNotFoundError(f"no embedded suite {name!r}; known suites: {', '.join(known)}")
    meta = yaml.safe_load(manifest.read_text())
    tasks, errors = [], []
    for entry in meta["tasks"]:
        path = root / entry["file"]
        source = path.read_text()
        err = _validate(path, source, import_check)
        if err:
            errors.append(err)
            continue
        tasks.append(Task(id=entry["id"], name=entry["name"], level=int(meta.get("level", 3)),
                          family=entry["family"], source=source, path=str(path),
                          small=dict(entry.get("small") or {})))
    return LoadReport(_select(tasks, ids, names), errors)


_KB_NAME = re.compile(r"^(\d+)_(.+)$")


def load_dir(
    root: str | Path, level: int | None = None, ids: list[str] | None = None,
    names: list[str] | None = None, import_check: bool = True,
) -> LoadReport:
    """Every ``*.py`` in a directory of KernelBench-format files.

    ``root`` may be a KernelBench checkout (with ``level``: ``<root>/KernelBench/level<N>``) or
    the directory of files itself. Bad files are reported, not fatal.
    """
    root = Path(root).expanduser()
    candidates = [root]
    if level is not None:
        candidates = [root / "KernelBench" / f"level{level}", root / f"level{level}", root]
    folder = next((c for c in candidates if c.is_dir()), None)
    if folder is None:
        raise FileNotFoundError(f"task directory {root} does not exist"
                                + (f" (looked for level{level} in it)" if level else ""))
    files = sorted(folder.glob("*.py"), key=_kb_sort_key)
    if not files:
        raise FileNotFoundError(f"task directory {folder} holds no .py files")
    tasks, errors = [], []
    lvl = level if level is not None else _infer_level(folder)
    for path in files:
        try:
            source = path.read_text()
        except UnicodeDecodeError:
            errors.append(f"{path}: it is not UTF-8 text.")
            continue
        err = _validate(path, source, import_check)
        if err:
            errors.append(err)
            continue
        m = _KB_NAME.match(path.stem)
        num, name = (m.group(1), m.group(2)) if m else (path.stem, path.stem)
        tasks.append(Task(id=f"L{lvl}_{num}", name=name, level=lvl, family=guess_family(name),
                          source=source, path=str(path)))
    return LoadReport(_select(tasks, ids, names), errors)


def _kb_sort_key(p: Path) -> tuple[int, str]:
    m = _KB_NAME.match(p.stem)
    return (int(m.group(1)), p.stem) if m else (10**9, p.stem)


def _infer_level(folder: Path) -> int:
    m = re.search(r"level(\d+)", folder.name)
    return int(m.group(1)) if m else 0


def load_file(path: str | Path) -> Task:
    """A single reference file as a task (for ``mining eval <file> <candidate>``)."""
    path = Path(path)
    source = path.read_text()
    err = _validate(path, source, import_check=True)
    if err:
        raise ReferenceError_(err)
    return Task(id=path.stem, name=path.stem, level=0, family=guess_family(path.stem),
                source=source, path=str(path))


def load_tasks(task_cfg: Any) -> LoadReport:
    """Tasks for a ``task`` config group node (``conf/task/*.yaml``)."""
    kind = task_cfg.kind
    ids = list(task_cfg.ids) if task_cfg.get("ids") else None
    names = list(task_cfg.names) if task_cfg.get("names") else None
    if kind == "suite":
        return load_suite(task_cfg.suite, ids, names)
    if kind == "dir":
        if not task_cfg.get("root"):
            raise FileNotFoundError("task.root is not set: pass task.root=/path/to/KernelBench")
        return load_dir(task_cfg.root, task_cfg.get("level"), ids, names)
    raise ValueError(f"task.kind must be 'suite' or 'dir', not {kind!r}")
