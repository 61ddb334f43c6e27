"""Find the programs of a source and what the source says about each.

Three layouts, told apart by what is on disk:

- a KernelBench run: ``runs/<name>/level_<L>_problem_<P>_sample_<S>_kernel.py`` (``problem_<P>``
  alone is accepted too) with KernelBench's ``eval_results.json`` beside them and, when its
  ``generate_samples.py`` wrote one, ``generation_config.yaml`` (the producing model); a folder
  whose sub-folders are such runs is read as several runs;
- a plain tree ``<task>/<file>.py``: the folder names the task (an id, a KernelBench problem
  number or file name), or a ``reference.py`` beside the programs is the task itself;
- a JSONL file, one object per line: ``code`` and ``task`` (or ``level`` + ``problem_id``, or
  ``reference``: a path), optionally ``model``, ``sample_id`` and KernelBench's verdict keys.

Nothing here raises for a bad program: it gets ``error``, one sentence, and the rest goes on.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

KB_FILE = re.compile(r"^(?:level_(\d+)_)?problem_(\d+)(?:_sample_(\d+))?(?:_kernel)?\.py$")
REFERENCE_NAMES = ("reference.py", "ref.py")


@dataclass
class Candidate:
    key: str                      # unique within its run: file name, <task>/<file>, or jsonl:<line>
    path: str                     # the file the program came from (absolute)
    kind: str                     # kernelbench_run | tree | jsonl
    run: str                      # run name
    code: str | None = None
    level: int | None = None
    problem: int | None = None
    sample: int | None = None
    task_ref: str | None = None   # the task as the source names it
    reference: str | None = None  # a reference file that is the task itself
    producer: str | None = None
    kb: dict | None = None        # KernelBench's recorded verdict for this program
    error: str | None = None      # why it cannot be evaluated (one sentence)


def discover(path: str | Path, run_name: str | None = None) -> tuple[list[Candidate], list[str]]:
    """(candidates, notes): every program under ``path`` and one sentence per source problem."""
    root = Path(path).expanduser().resolve()
    if root.is_file():
        return _jsonl(root, run_name)
    if not root.is_dir():
        raise FileNotFoundError(f"{path} is neither a directory nor a JSONL file")
    if _is_kb_run(root):
        return _kb_run(root, run_name)
    runs = sorted(d for d in root.iterdir() if d.is_dir() and _is_kb_run(d))
    if runs:  # a runs/ folder: each sub-folder is one run
        out: tuple[list[Candidate], list[str]] = ([], [])
        for d in runs:
            c, n = _kb_run(d, None)
            out[0].extend(c)
            out[1].extend(n)
        return out
    return _tree(root, run_name)


def _is_kb_run(d: Path) -> bool:
    return any(KB_FILE.match(p.name) for p in d.glob("*.py"))


def read_program(path: Path) -> tuple[str | None, str | None]:
    """(code, error) of one program file."""
    try:
        code = path.read_text()
    except UnicodeDecodeError:
        return None, "it is not UTF-8 text"
    except OSError as e:
        return None, f"it cannot be read ({e.strerror or e})"
    return code, modelnew_problem(code)


def modelnew_problem(code: str) -> str | None:
    """One sentence when the program defines no ``ModelNew`` (a syntax error is the harness's)."""
    if not code.strip():
        return "it is empty"
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None if re.search(r"\bModelNew\b", code) else "it defines no ModelNew"
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            return None
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "ModelNew" for t in targets):
                return None
    return "it defines no ModelNew"


# -- KernelBench runs ------------------------------------------------------------------------

def _kb_run(run: Path, run_name: str | None) -> tuple[list[Candidate], list[str]]:
    notes: list[str] = []
    gen = _generation_config(run, notes)
    verdicts = _eval_results(run, notes)
    out = []
    for p in sorted(run.glob("*.py"), key=_kb_sort):
        m = KB_FILE.match(p.name)
        if not m:
            continue
        level = int(m.group(1)) if m.group(1) else gen.get("level")
        prob, sample = int(m.group(2)), int(m.group(3) or 0)
        code, err = read_program(p)
        out.append(Candidate(
            key=p.name, path=str(p), kind="kernelbench_run", run=run_name or run.name, code=code,
            level=int(level) if level is not None else None, problem=prob, sample=sample,
            task_ref=f"level_{level}_problem_{prob}", producer=gen.get("model_name"),
            kb=verdicts.get((prob, sample)), error=err))
    return out, notes


def _kb_sort(p: Path) -> tuple:
    m = KB_FILE.match(p.name)
    return (int(m.group(1) or 0), int(m.group(2)), int(m.group(3) or 0)) if m else (1 << 30,)


def _generation_config(run: Path, notes: list[str]) -> dict:
    f = run / "generation_config.yaml"
    if not f.is_file():
        return {}
    try:
        data = yaml.safe_load(f.read_text())
    except (yaml.YAMLError, OSError, UnicodeDecodeError) as e:
        notes.append(f"{f}: it cannot be read as YAML ({type(e).__name__}); no producer recorded.")
        return {}
    return data if isinstance(data, dict) else {}


def _eval_results(run: Path, notes: list[str]) -> dict[tuple[int, int], dict]:
    """KernelBench's verdicts by (problem, sample). Its eval script writes ``{"<P>": [record]}``;
    some forks write ``{"<P>": record}``."""
    f = run / "eval_results.json"
    if not f.is_file():
        return {}
    try:
        data = json.loads(f.read_text())
    except (ValueError, OSError, UnicodeDecodeError) as e:
        notes.append(f"{f}: it is not valid JSON ({type(e).__name__}); KernelBench's verdicts of "
                     "this run are not recorded.")
        return {}
    out: dict[tuple[int, int], dict] = {}
    for prob, recs in (data.items() if isinstance(data, dict) else []):
        for rec in recs if isinstance(recs, list) else [recs]:
            if isinstance(rec, dict) and str(prob).isdigit():
                out[(int(prob), int(rec.get("sample_id") or 0))] = rec
    return out


# -- plain trees -----------------------------------------------------------------------------

def _tree(root: Path, run_name: str | None) -> tuple[list[Candidate], list[str]]:
    out, notes = [], []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root)
        if p.name in REFERENCE_NAMES or len(rel.parts) < 2:
            if len(rel.parts) < 2 and p.name not in REFERENCE_NAMES:
                notes.append(f"{p}: it is not inside a <task>/ folder; skipped.")
            continue
        ref = next((p.parent / n for n in REFERENCE_NAMES if (p.parent / n).is_file()), None)
        code, err = read_program(p)
        out.append(Candidate(key=str(rel), path=str(p), kind="tree", run=run_name or root.name,
                             code=code, task_ref=rel.parts[0],
                             reference=str(ref) if ref else None, error=err))
    return out, notes


# -- JSONL -----------------------------------------------------------------------------------

def _jsonl(f: Path, run_name: str | None) -> tuple[list[Candidate], list[str]]:
    try:
        lines = f.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise FileNotFoundError(f"{f} cannot be read ({type(e).__name__})") from e
    out = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        c = Candidate(key=f"jsonl:{i}", path=str(f), kind="jsonl", run=run_name or f.stem)
        try:
            row = json.loads(line)
        except ValueError:
            row = None
        if not isinstance(row, dict):
            c.error = f"line {i} is not a JSON object"
            out.append(c)
            continue
        _jsonl_fields(c, row, f.parent, i)
        out.append(c)
    return out, []


def _jsonl_fields(c: Candidate, row: dict[str, Any], base: Path, line: int) -> None:
    c.run = str(row.get("run") or c.run)
    c.producer = row.get("model") or row.get("producer")
    c.sample = _int(row.get("sample_id", row.get("sample")))
    c.level, c.problem = _int(row.get("level")), _int(row.get("problem_id"))
    if row.get("id") is not None:
        c.key = f"jsonl:{row['id']}"
    task = row.get("task")
    c.task_ref = str(task) if task is not None else (
        f"level_{c.level}_problem_{c.problem}" if c.problem is not None else None)
    if row.get("reference"):
        ref = Path(str(row["reference"])).expanduser()
        c.reference = str(ref if ref.is_absolute() else base / ref)
    if any(k in row for k in ("compiled", "correctness")):
        c.kb = {k: row[k] for k in ("compiled", "correctness", "runtime", "ref_runtime", "speedup",
                                    "metadata", "runtime_stats") if k in row}
    code = row.get("code")
    if not isinstance(code, str):
        c.error = f"line {line} has no `code` string"
    elif c.task_ref is None and c.reference is None:
        c.error = "it names no task (`task`, `level` + `problem_id`, or `reference`)"
    else:
        c.code, c.error = code, modelnew_problem(code)


def _int(v) -> int | None:
    try:
        return None if v is None else int(v)
    except (TypeError, ValueError):
        return None
