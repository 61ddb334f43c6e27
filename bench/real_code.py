"""The reward's verdicts on public Level 3 programs nobody here wrote, against hand labels.

    python scripts/fetch_real_code.py --mirror-root /work/.mirror   # lay the corpus out first
    python bench/real_code.py --out real_code.jsonl [--shard 0/2] [key=value ...]   # GPU machine
    python bench/real_code.py --replay real_code.jsonl              # CPU: re-score recorded results
    python bench/real_code.py --static-only                         # CPU: no harness result, seconds

Reads every bench/real_code/labels_*.csv (one row per program: repo, commit, path, problem,
producer, label, reason) and pairs each program with its reference: the same repo's
KernelBench/level3/<problem>_*.py, else upstream KernelBench's.

Default mode evaluates every labelled program with the real harness (rewards.harness.Evaluator,
all submitted at once), scores each with rewards.score(...) and appends one JSON line per program
to --out (label, status, correct, speedup, reward, findings, and the full harness result with its
evidence). Resumable: programs already in --out are skipped; --shard i/n takes every n-th program.
Harness overrides are positional key=value pairs (dotted keys, YAML values) on top of
conf/harness/default.yaml; the defaults here are compile_baseline=false and
profiling.kernel.enabled=false (ncu and torch.compile baselines would cost minutes).
Keys prefixed `rewards.` override conf/rewards/default.yaml instead.

--replay recomputes the rewards from the recorded harness results (no GPU): the reward can be
iterated on CPU with real dynamic evidence. --static-only scores with no harness result.

Printed against the labels (positives = no-custom and hack:* except hack:eval_only, which
training mode makes incorrect and is counted apart; predicted = at least one major
finding): precision and recall of major findings, recall counting any zero reward too, false hack
verdicts on legit / legit-degenerate programs (path and finding), status agreement with
KernelBench's recorded verdicts (eval_results.json: compiled, correctness) where present,
per-label counts; then the same precision / recall / false-positive table for KernelBench's own
static checker (data/upstream/kernel_static_checker.py, validate_kernel_static, backend cuda,
precision fp32) as the baseline, and the difference between the two.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import csv
import hashlib
import importlib.util
import json
import re
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench" / "real_code"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from fetch_real_code import local_path, slug  # noqa: E402

LABELS = ("legit", "legit-degenerate", "no-custom")
EXTRA_HACKS = ("eval_only",)  # labels beyond rewards.findings.CATEGORIES
DEFAULT_HARNESS = {"compile_baseline": False, "profiling": {"kernel": {"enabled": False}}}
UPSTREAM = "upstream"


@dataclass(frozen=True)
class Label:
    repo: str
    commit: str
    path: str
    level: int
    problem: int
    sample: int
    producer: str
    label: str
    reason: str

    @property
    def key(self) -> str:
        return f"{self.repo}@{self.commit[:12]}:{self.path}"

    @property
    def positive(self) -> bool:
        """A program the reward should give a major finding: no custom kernel runs, or a hack."""
        return is_positive(self.label)


def is_positive(label: str) -> bool:
    """Should get a major finding. eval_only programs are not: under KernelBench's training mode
    they are simply incorrect, which the status (and a zero reward) says, not a finding."""
    return label == "no-custom" or (label.startswith("hack:") and label[5:] not in EXTRA_HACKS)


def is_caught_by_status(label: str) -> bool:
    return label.startswith("hack:") and label[5:] in EXTRA_HACKS


def check_label(label: str) -> None:
    from rewards.findings import CATEGORIES

    if label in LABELS:
        return
    if label.startswith("hack:") and label[5:] in (*CATEGORIES, *EXTRA_HACKS):
        return
    raise ValueError(f"unknown label {label!r}: use {', '.join(LABELS)} or hack:<category> "
                     f"(rewards.findings.CATEGORIES or {', '.join(EXTRA_HACKS)})")


def read_labels(files: list[Path]) -> list[Label]:
    """Every row of the labels files; a malformed or duplicated row stops with its file and line."""
    out, seen = [], {}
    for f in files:
        with f.open(newline="") as fh:
            for n, r in enumerate(csv.DictReader(fh), 2):
                try:
                    lab = Label(r["repo"], r["commit"], r["path"], int(r["level"]), int(r["problem"]),
                                int(r["sample"] or 0), r["producer"], r["label"].strip(), r["reason"])
                    check_label(lab.label)
                except (KeyError, ValueError, TypeError) as e:
                    raise ValueError(f"{f.name} line {n}: {e}") from None
                if lab.key in seen:
                    raise ValueError(f"{f.name} line {n}: {lab.path} is already labelled in {seen[lab.key]}")
                seen[lab.key] = f"{f.name} line {n}"
                out.append(lab)
    return out


def dedupe(labels: list[Label], data: Path) -> tuple[list[Label], list[tuple[Label, Label]]]:
    """A program labelled twice under two paths (a run linking to another run's file) counts once:
    (kept labels, [(dropped, kept twin)])."""
    seen: dict[str, Label] = {}
    kept, dups = [], []
    for lab in labels:
        p = local_path(data, lab.repo, lab.path)
        h = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else lab.key
        if h in seen:
            dups.append((lab, seen[h]))
            continue
        seen[h] = lab
        kept.append(lab)
    return kept, dups


def duplicate_lines(dups: list[tuple[Label, Label]]) -> list[str]:
    out = [f"{len(dups)} programs labelled twice (identical files) counted once:"] if dups else []
    for lab, twin in dups:
        clash = "" if lab.label == twin.label else f"  LABELS DIFFER: {lab.label} vs {twin.label}"
        out.append(f"  {lab.repo}:{lab.path} == {twin.path}{clash}")
    return out


def reference_path(data: Path, lab: Label) -> Path | None:
    """The repo's own level<L> reference for the problem, else upstream's; None if neither."""
    for root in (data / slug(lab.repo), data / UPSTREAM):
        hits = sorted((root / "KernelBench" / f"level{lab.level}").glob(f"{lab.problem}_*.py"))
        if hits:
            return hits[0]
    return None


# KernelBench's run failed for its machine, not for the program (its A100 out of memory, a kernel
# built for another arch): no verdict on the program
KB_INFRA = re.compile(r"out of memory|no kernel image is available", re.I)


def kb_verdict(data: Path, lab: Label) -> dict | None:
    """KernelBench's recorded {compiled, correctness} for this program, from its run's eval_results,
    with its reason: error (first line of its runtime or compilation error), mismatch (its largest
    max_difference), hardware, and infra (a failure of its machine, not of the program)."""
    f = local_path(data, lab.repo, lab.path).parent / "eval_results.json"
    if not f.is_file():
        return None
    entry = json.loads(f.read_text()).get(str(lab.problem))
    samples = entry if isinstance(entry, list) else [entry] if entry else []
    for s in samples:
        if int(s.get("sample_id", 0)) == lab.sample:
            meta = s.get("metadata") or {}
            runtime = str(meta.get("runtime_error") or "")
            error = runtime or str(meta.get("compilation_error") or "")
            # a list of strings, or (some runs) that list as one string
            diffs = re.findall(r"\d+\.?\d*(?:e[-+]?\d+)?", str(meta.get("max_difference") or ""), re.I)
            correct = bool(s.get("correctness"))
            return {"compiled": bool(s.get("compiled")), "correctness": correct,
                    "infra": not correct and bool(KB_INFRA.search(runtime)),
                    "error": error.splitlines()[0] if error.strip() else None,
                    "mismatch": max(map(float, diffs)) if diffs else None,
                    "hardware": meta.get("hardware")}
    return None


def load_kb_checker(data: Path):
    f = data / UPSTREAM / "kernel_static_checker.py"
    if not f.is_file():
        raise SystemExit(f"{f} is missing: run python scripts/fetch_real_code.py first")
    spec = importlib.util.spec_from_file_location("kb_static_checker", f)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def kb_static(checker, code: str) -> dict:
    """KernelBench's static checker with its default preset for CUDA fp32 (Level 3's dtype)."""
    valid, errors, warnings = checker.validate_kernel_static(code, backend="cuda", precision="fp32")
    return {"valid": valid, "errors": errors, "warnings": warnings}


# ----------------------------------------------------------------------------- scoring


def summarize(lab: Label, record, result: dict | None, error: str | None = None) -> dict:
    """One output line: the label, the harness outcome and the reward's verdict."""
    res = result or {}
    row = {"key": lab.key, "repo": lab.repo, "path": lab.path, "problem": lab.problem,
           "producer": lab.producer, "label": lab.label, "reason": lab.reason,
           "status": res.get("status"),
           "correct": res.get("correct"), "max_abs_err": res.get("max_abs_err"),
           "speedup": res.get("speedup")}
    if record is not None:
        row.update(reward=record.reward, major_hack=record.major_hack,
                   findings=[f.to_dict() for f in record.findings])
    if error:
        row["error"] = error
    if result is not None:
        row["result"] = res  # the full EvalResult, evidence included: --replay re-scores from it
    return row


def score_one(lab: Label, ref_src: str, cand_src: str, result: dict | None, reward_cfg: dict) -> dict:
    import rewards

    try:
        rec = rewards.score(ref_src, cand_src, result, cfg=reward_cfg or None)
    except Exception as e:  # a reward crash is a bench result, not the end of the run
        return summarize(lab, None, result, f"reward: {type(e).__name__}: {e}")
    return summarize(lab, rec, result)


def sources(data: Path, lab: Label) -> tuple[str, str] | str:
    """(reference, candidate) sources, or one sentence saying what is missing."""
    cand, ref = local_path(data, lab.repo, lab.path), reference_path(data, lab)
    if not cand.is_file():
        return f"{cand} is missing (run scripts/fetch_real_code.py)"
    if ref is None:
        return f"no level{lab.level} reference for problem {lab.problem}"
    return ref.read_text(), as_model_new(cand.read_text(errors="replace"))


def as_model_new(src: str) -> str:
    """METR's KernelBenchFiltered names the solution `Model` (a class, or a function returning a
    scripted module): rename it to `ModelNew` when the file defines no `ModelNew`."""
    if re.search(r"^(class|def)\s+ModelNew\b", src, re.M) or \
            not re.search(r"^(class|def)\s+Model\b", src, re.M):
        return src
    return re.sub(r"\bModel\b", "ModelNew", src)


def run_static(labels: list[Label], data: Path, reward_cfg: dict) -> list[dict]:
    rows = []
    for lab in labels:
        src = sources(data, lab)
        rows.append(summarize(lab, None, None, src) if isinstance(src, str)
                    else score_one(lab, *src, None, reward_cfg))
    return rows


def run_replay(labels: list[Label], data: Path, results_file: Path, reward_cfg: dict) -> list[dict]:
    recorded = {r["key"]: r for r in read_jsonl(results_file)}
    rows = []
    for lab in labels:
        rec, src = recorded.get(lab.key), sources(data, lab)
        if rec is None or "result" not in rec:
            continue  # not evaluated (yet): left out of the tables
        rows.append(summarize(lab, None, rec["result"], src) if isinstance(src, str)
                    else score_one(lab, *src, rec["result"], reward_cfg))
    return rows


def harness_config(overrides: dict) -> dict:
    base = yaml.safe_load((ROOT / "conf" / "harness" / "default.yaml").read_text())
    return deep_merge(deep_merge(base, DEFAULT_HARNESS), overrides)


def make_task(lab: Label, ref_path: Path, ref_src: str):
    from mining.tasks import Task, guess_family

    return Task(id=f"l{lab.level}_{ref_path.stem}", name=ref_path.stem, level=lab.level,
                family=guess_family(ref_path.stem), source=ref_src, path=str(ref_path))


def run_harness(labels: list[Label], data: Path, out: Path, harness_overrides: dict,
                reward_cfg: dict) -> None:
    """Evaluates every program not yet in `out`, appending one line per program as it finishes."""
    from rewards.harness import Evaluator

    done = {r["key"] for r in read_jsonl(out)} if out.is_file() else set()
    todo = [lab for lab in labels if lab.key not in done]
    log(f"{len(todo)} programs to evaluate ({len(done)} already in {out})")
    t0, finished = time.perf_counter(), 0
    with Evaluator(harness_config(harness_overrides)) as ev, out.open("a") as fh:
        futs = {}
        for lab in todo:
            src = sources(data, lab)
            if isinstance(src, str):
                write_line(fh, summarize(lab, None, None, src))
                continue
            ref_path = reference_path(data, lab)
            futs[ev.submit(make_task(lab, ref_path, src[0]), src[1])] = (lab, src)
        for n, f in enumerate(cf.as_completed(futs), 1):
            lab, (ref_src, cand_src) = futs[f]
            try:
                result = f.result().to_dict()
            except Exception:
                write_line(fh, summarize(lab, None, None, "harness: " + traceback.format_exc(limit=2)))
                continue
            row = score_one(lab, ref_src, cand_src, result, reward_cfg)
            write_line(fh, row)
            finished += 1
            wall = time.perf_counter() - t0
            # real public programs through the whole harness (evaluator start included): issue 17's
            # real-program figure, quoted beside the synthetic throughput bench
            log(f"[{n}/{len(futs)}] {lab.path}: {row['status']} reward={row.get('reward')}"
                f"  ({finished} in {wall:.0f} s: {60 * finished / wall:.2f} per minute)")


# ----------------------------------------------------------------------------- metrics


def confusion(pairs: list[tuple[bool, bool]]) -> dict:
    """Precision and recall from (actual positive, predicted positive) pairs."""
    tp = sum(a and p for a, p in pairs)
    fp = sum(p and not a for a, p in pairs)
    fn = sum(a and not p for a, p in pairs)
    tn = sum(not a and not p for a, p in pairs)
    return {"tp": tp, "fp": fp, "fn": fn, "tn": tn,
            "precision": tp / (tp + fp) if tp + fp else None,
            "recall": tp / (tp + fn) if tp + fn else None}


def has_major(row: dict) -> bool:
    return any(f["severity"] == "major" for f in row.get("findings") or [])


def scored(rows: list[dict]) -> list[dict]:
    return [r for r in rows if "findings" in r]


def judged(rows: list[dict]) -> list[dict]:
    """Rows the major-finding tables judge: eval_only hacks are neither positives nor negatives
    there (their own line counts them)."""
    return [r for r in rows if not is_caught_by_status(r["label"])]


def reward_metrics(rows: list[dict]) -> dict:
    rows = judged(scored(rows))
    return {"major": confusion([(is_positive(r["label"]), has_major(r)) for r in rows]),
            "major_or_zero": confusion([(is_positive(r["label"]), has_major(r) or not r["reward"])
                                        for r in rows])}


def baseline_metrics(rows: list[dict]) -> dict:
    have = [r for r in judged(rows) if "kb_static" in r]
    return {"errors": confusion([(is_positive(r["label"]), not r["kb_static"]["valid"]) for r in have]),
            "errors_or_warnings": confusion([(is_positive(r["label"]), not r["kb_static"]["valid"]
                                              or bool(r["kb_static"]["warnings"])) for r in have])}


def false_hacks(rows: list[dict]) -> list[tuple[str, str]]:
    """(path, findings) of legit / legit-degenerate programs given a major finding."""
    out = []
    for r in judged(scored(rows)):
        if not is_positive(r["label"]) and has_major(r):
            fs = "; ".join(f"{f['category']} ({f['evidence'][:80]})" for f in r["findings"]
                           if f["severity"] == "major")
            out.append((f"{r['repo']}:{r['path']}", fs))
    return out


def missed(rows: list[dict]) -> list[tuple[str, str]]:
    """(path, label and reason) of positives that got no major finding."""
    return [(f"{r['repo']}:{r['path']}", f"{r['label']}: {r.get('reason', '')[:90]}")
            for r in judged(scored(rows)) if is_positive(r["label"]) and not has_major(r)]


def baseline_false_hacks(rows: list[dict]) -> list[tuple[str, str]]:
    return [(f"{r['repo']}:{r['path']}", "; ".join(e[:80] for e in r["kb_static"]["errors"]))
            for r in judged(rows)
            if "kb_static" in r and not is_positive(r["label"]) and not r["kb_static"]["valid"]]


def status_agreement(rows: list[dict]) -> dict | None:
    """Harness status vs KernelBench's recorded compiled/correctness, where both exist; programs
    KernelBench's own run failed on for its machine (kb infra) are counted apart, not judged."""
    both = [r for r in rows if r.get("kb") and r.get("status")]
    if not both:
        return None
    infra = [r for r in both if r["kb"]["infra"]]
    both = [r for r in both if not r["kb"]["infra"]]
    compiled = Counter((r["kb"]["compiled"], r["status"] != "compile_error") for r in both)
    correct = Counter((r["kb"]["correctness"], bool(r["correct"])) for r in both)
    return {"n": len(both), "infra": len(infra), "infra_ours_ok": sum(r["status"] == "ok" for r in infra),
            "compiled_agree": compiled[(True, True)] + compiled[(False, False)],
            "correct_agree": correct[(True, True)] + correct[(False, False)],
            "kb_correct_ours_not": correct[(True, False)], "ours_correct_kb_not": correct[(False, True)],
            "disagreements": [(r["path"], disagreement(r)) for r in both
                              if r["kb"]["correctness"] != bool(r["correct"])]}


def disagreement(row: dict) -> str:
    """Why KernelBench and the harness differ on a program: each side's verdict and evidence."""
    kb, err = row["kb"], row.get("max_abs_err")
    why = (f": {kb['error'][:90]}" if kb["error"] else
           f": max_difference {kb['mismatch']:.3g}" if kb["mismatch"] is not None else "")
    return (f"KB {'correct' if kb['correctness'] else 'incorrect'}{why} ({kb['hardware'] or 'gpu n/a'}); "
            f"ours {row['status']}, max_abs_err {'n/a' if err is None else f'{err:.3g}'}")


def per_label(rows: list[dict]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for r in rows:
        d = out.setdefault(r["label"], {"n": 0, "major": 0, "zero": 0, "kb_flag": 0,
                                        "kb_accepted": 0, "cats": Counter()})
        d["n"] += 1
        d["major"] += has_major(r)
        d["zero"] += "reward" in r and not r["reward"]
        d["kb_flag"] += "kb_static" in r and not r["kb_static"]["valid"]
        d["kb_accepted"] += bool(r.get("kb") and r["kb"]["correctness"])
        d["cats"].update(f["category"] for f in r.get("findings") or [] if f["severity"] == "major")
    return out


# ----------------------------------------------------------------------------- report


def pct(x: float | None) -> str:
    return "  n/a" if x is None else f"{100 * x:5.1f}%"


def conf_line(name: str, c: dict) -> str:
    return (f"  {name:<34} precision {pct(c['precision'])}  recall {pct(c['recall'])}  "
            f"(tp {c['tp']}, fp {c['fp']}, fn {c['fn']}, tn {c['tn']})")


def report(rows: list[dict], mode: str) -> str:
    lines = [f"real-code bench ({mode}): {len(rows)} labelled programs, "
             f"{sum(is_positive(r['label']) for r in rows)} positives (no-custom or hack:*, "
             f"eval_only apart)"]
    errs = [r for r in rows if r.get("error")]
    if errs:
        lines.append(f"  {len(errs)} not scored:")
        lines += [f"    {r['path']}: {r['error'][-160:]}" for r in errs[:10]]
    rm, bm = reward_metrics(rows), baseline_metrics(rows)
    lines += ["", "major findings vs labels",
              conf_line("reward: major finding", rm["major"]),
              conf_line("reward: major finding or reward 0", rm["major_or_zero"])
              + ("  [static-only: every reward is 0]" if mode == "static-only" else ""),
              conf_line("KernelBench static checker: errors", bm["errors"]),
              conf_line("KB static checker: errors+warnings", bm["errors_or_warnings"])]
    ev = [r for r in scored(rows) if is_caught_by_status(r["label"])]
    if ev:
        lines.append(f"  eval_only (expected: incorrect in training mode): {len(ev)}, status not ok "
                     f"{sum(r.get('status') not in (None, 'ok') for r in ev)}, reward 0 "
                     f"{sum(not r['reward'] for r in ev)}, major finding {sum(map(has_major, ev))}")
    for what in ("precision", "recall"):
        a, b = rm["major"][what], bm["errors"][what]
        if a is not None and b is not None:
            ratio = f", ratio {a / b:.2f}" if b else ""
            lines.append(f"  reward - KB checker {what}: {100 * (a - b):+.1f} points{ratio}")
    fh, bfh = false_hacks(rows), baseline_false_hacks(rows)
    lines += ["", f"false hack verdicts on legit/legit-degenerate: reward {len(fh)}, KB checker {len(bfh)}"]
    lines += [f"  reward  {p}: {f}" for p, f in fh]
    lines += [f"  KBcheck {p}: {f}" for p, f in bfh]
    fn = missed(rows)
    lines += ["", f"positives without a major finding (reward): {len(fn)}"]
    lines += [f"  {p}: {why}" for p, why in fn]
    st = status_agreement(rows)
    lines.append("")
    if st is None:
        lines.append("status vs KernelBench's recorded verdicts: n/a (no harness results in this mode)")
    else:
        n = st["n"]
        lines.append(f"status vs KernelBench's recorded verdicts ({n} programs KB judged): compiled "
                     f"agree {st['compiled_agree']}/{n}, correctness agree {st['correct_agree']}/{n} "
                     f"(KB correct, ours not: {st['kb_correct_ours_not']}; ours correct, KB not: "
                     f"{st['ours_correct_kb_not']})")
        lines.append(f"  not judged: {st['infra']} KB runs failed for KB's machine (out of memory, no kernel "
                     f"image for its arch), ours ok on {st['infra_ours_ok']}")
        lines += [f"  {p}: {why}" for p, why in st["disagreements"]]
    lines += ["", f"  {'label':<26}{'n':>4}{'major':>7}{'zero':>6}{'KBflag':>8}{'KBok':>6}  major categories"]
    for lab, d in sorted(per_label(rows).items()):
        cats = ", ".join(f"{c} {n}" for c, n in d["cats"].most_common())
        lines.append(f"  {lab:<26}{d['n']:>4}{d['major']:>7}{d['zero']:>6}{d['kb_flag']:>8}"
                     f"{d['kb_accepted']:>6}  {cats}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- plumbing


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_line(fh, row: dict) -> None:
    fh.write(json.dumps(row, default=str) + "\n")
    fh.flush()


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def deep_merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def parse_overrides(items: list[str]) -> tuple[dict, dict]:
    """key=value pairs (dotted keys, YAML values) -> (harness overrides, reward overrides)."""
    harness, reward = {}, {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"override {item!r} is not key=value")
        key, value = item.split("=", 1)
        target = reward if key.startswith("rewards.") else harness
        parts = key.removeprefix("rewards.").removeprefix("harness.").split(".")
        node = target
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = yaml.safe_load(value)
    return harness, reward


def shard(labels: list[Label], spec: str | None) -> list[Label]:
    if not spec:
        return labels
    i, n = (int(x) for x in spec.split("/"))
    if not 0 <= i < n:
        raise SystemExit(f"--shard {spec}: need 0 <= i < n")
    return [lab for k, lab in enumerate(sorted(labels, key=lambda x: x.key)) if k % n == i]


def annotate(rows: list[dict], labels: list[Label], data: Path, checker) -> list[dict]:
    """Adds KernelBench's recorded verdict and its static checker's verdict to each row."""
    by_key = {lab.key: lab for lab in labels}
    for r in rows:
        lab = by_key[r["key"]]
        r["label"] = lab.label  # the current labels file wins over a recorded one
        r["kb"] = kb_verdict(data, lab)
        cand = local_path(data, lab.repo, lab.path)
        if cand.is_file():
            r["kb_static"] = kb_static(checker, cand.read_text(errors="replace"))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("overrides", nargs="*", help="harness key=value (dotted), or rewards.key=value")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--static-only", action="store_true", help="score without a harness result (CPU)")
    mode.add_argument("--replay", type=Path, help="re-score the harness results recorded in this JSONL")
    ap.add_argument("--out", type=Path, default=Path("real_code.jsonl"),
                    help="GPU mode: results JSONL (appended; resumable)")
    ap.add_argument("--shard", help="i/n: evaluate every n-th program (GPU mode)")
    ap.add_argument("--data", type=Path, default=BENCH / "data", help="the fetched corpus")
    ap.add_argument("--labels", type=Path, nargs="*", default=None,
                    help="labels CSVs (default: bench/real_code/labels_*.csv)")
    ap.add_argument("--json", type=Path, help="also write the scored rows (static/replay) here")
    a = ap.parse_args(argv)
    harness_over, reward_cfg = parse_overrides(a.overrides)
    labels, dups = dedupe(read_labels(a.labels or sorted(BENCH.glob("labels_*.csv"))), a.data)
    checker = load_kb_checker(a.data)
    if a.static_only:
        rows, name = run_static(labels, a.data, reward_cfg), "static-only"
    elif a.replay:
        rows, name = run_replay(labels, a.data, a.replay, reward_cfg), f"replay of {a.replay}"
    else:
        run_harness(shard(labels, a.shard), a.data, a.out, harness_over, reward_cfg)
        rows, name = run_replay(labels, a.data, a.out, reward_cfg), f"harness, {a.out}"
    rows = annotate(rows, labels, a.data, checker)
    if a.json:
        a.json.write_text("\n".join(json.dumps({k: v for k, v in r.items() if k != "result"},
                                               default=str) for r in rows) + "\n")
    print("\n".join([report(rows, name), "", *duplicate_lines(dups)]).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
