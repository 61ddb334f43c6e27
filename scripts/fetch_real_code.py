"""Lay out the real-code corpus (public Level 3 programs) in KernelBench's own layout.

    python scripts/fetch_real_code.py --mirror-root /work/.mirror     # read local bare mirrors
    python scripts/fetch_real_code.py                                 # or git clone (internet)

Reads bench/real_code/sources.yaml (pinned repos, commits, runs) and every
bench/real_code/labels_*.csv, and writes under the ignored folder bench/real_code/data/:

    data/<owner>__<repo>/runs/<run>/level_3_problem_<P>_sample_<S>_kernel.py
    data/<owner>__<repo>/runs/<run>/eval_results.json     KernelBench's recorded verdicts
    data/<owner>__<repo>/KernelBench/level3/*.py          the repo's references (else upstream's)
    data/<owner>__<repo>/<path>                           any other file a labels row names
    data/upstream/KernelBench/level3/*.py                 upstream KernelBench's references
    data/upstream/kernel_static_checker.py                KernelBench's static checker (baseline)

so that `python -m mining tasks task=kernelbench task.root=bench/real_code/data/<owner>__<repo>
task.level=3` lists the tasks. Runs written as problem_<P>_kernel.py + detailed_results.json (an
older runner's format) are renamed and their verdicts rewritten as eval_results.json. Idempotent:
unchanged files are not rewritten. Never commit what it brings.
"""

from __future__ import annotations

import argparse
import csv
import json
import posixpath
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench" / "real_code"
KERNEL_RE = re.compile(r"^(?:level_(\d+)_)?problem_(\d+)(?:_sample_(\d+))?_kernel\.py$")


class SourceError(Exception):
    """A repository or commit that cannot be read; the message is one sentence."""


def slug(repo: str) -> str:
    owner, name = repo.split("/", 1)
    return f"{owner}__{name}"


def parse_kernel_name(name: str, default_level: int = 3) -> tuple[int, int, int] | None:
    """(level, problem, sample) of a run file name in either runner's naming, else None."""
    m = KERNEL_RE.match(name)
    if not m:
        return None
    return int(m.group(1) or default_level), int(m.group(2)), int(m.group(3) or 0)


def layout_name(level: int, problem: int, sample: int) -> str:
    return f"level_{level}_problem_{problem}_sample_{sample}_kernel.py"


def local_path(data_root: Path, repo: str, path: str) -> Path:
    """Where the file `path` of `repo` lies under data_root (run kernels in KernelBench naming)."""
    p = Path(path)
    parsed = parse_kernel_name(p.name)
    name = layout_name(*parsed) if parsed else p.name
    return data_root / slug(repo) / p.parent / name


def normalize_results(raw: dict, filename: str) -> dict:
    """KernelBench's eval_results.json mapping {problem_id: [sample result, ...]}."""
    if filename != "detailed_results.json":
        return raw
    out: dict[str, list] = {}
    for r in raw.get("results", []):
        if r.get("eval_result") is not None:
            out.setdefault(str(r["problem_id"]), []).append({"sample_id": 0, **r["eval_result"]})
    return out


class GitSource:
    """Reads files of one repository from a bare git directory."""

    def __init__(self, repo: str, git_dir: Path):
        self.repo, self.git_dir = repo, git_dir

    def _git(self, *args: str) -> bytes:
        r = subprocess.run(["git", "--git-dir", str(self.git_dir), *args], capture_output=True)
        if r.returncode:
            raise SourceError(r.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""])
        return r.stdout

    def has(self, commit: str) -> bool:
        try:
            self._git("cat-file", "-e", f"{commit}^{{commit}}")
            return True
        except SourceError:
            return False

    def show(self, commit: str, path: str, hops: int = 8) -> bytes:
        """The file's bytes; a symlink in the tree (runs often link to generated_kernels/) is
        followed inside the repository."""
        try:
            entry = self._git("ls-tree", commit, "--", path).decode().split(None, 3)
            data = self._git("show", f"{commit}:{path}") if entry else b""
        except SourceError as e:
            raise SourceError(f"{self.repo}@{commit[:12]} has no file {path} ({e}).") from None
        if not entry:
            raise SourceError(f"{self.repo}@{commit[:12]} has no file {path}.")
        if entry[0] == "120000":
            target = posixpath.normpath(posixpath.join(posixpath.dirname(path), data.decode()))
            if hops == 0 or target.startswith("../"):
                raise SourceError(f"{self.repo}@{commit[:12]}: {path} links outside the repo.")
            return self.show(commit, target, hops - 1)
        return data

    def ls(self, commit: str, tree: str) -> list[str]:
        try:
            out = self._git("ls-tree", "--name-only", f"{commit}:{tree}")
        except SourceError:
            raise SourceError(f"{self.repo}@{commit[:12]} has no directory {tree}.") from None
        return out.decode().split()


def open_source(repo: str, commit: str, mirror_root: Path | None, cache: Path,
                offline: bool = False) -> GitSource:
    """A mirror <mirror_root>/<owner>+<name>/repo when there is one, else a bare clone in cache
    (never with offline)."""
    if mirror_root is not None:
        git_dir = mirror_root / repo.replace("/", "+") / "repo"
        if git_dir.is_dir():
            src = GitSource(repo, git_dir)
            if not src.has(commit):
                raise SourceError(f"The mirror of {repo} at {git_dir} lacks commit {commit}.")
            return src
    git_dir = cache / f"{slug(repo)}.git"
    url = f"https://github.com/{repo}"
    if offline and not git_dir.is_dir():
        raise SourceError(f"No mirror or cached clone of {repo} (offline: not cloning {url}).")
    if not git_dir.is_dir():
        r = subprocess.run(["git", "clone", "--bare", "--filter=blob:none", "-q", url,
                            str(git_dir)], capture_output=True)
        if r.returncode:
            raise SourceError(f"Could not clone {url} (no mirror and no network, or no such repo).")
    src = GitSource(repo, git_dir)
    if not src.has(commit) and not offline:
        subprocess.run(["git", "--git-dir", str(git_dir), "fetch", "-q", "--filter=blob:none",
                        "origin", commit], capture_output=True)
    if not src.has(commit):
        raise SourceError(f"{url} has no commit {commit} (or it could not be fetched).")
    return src


class Writer:
    """Writes files only when their content changed; counts what it did."""

    def __init__(self):
        self.written: set[Path] = set()
        self.new = self.changed = self.same = 0

    def write(self, dest: Path, data: bytes) -> None:
        self.written.add(dest)
        if dest.is_file() and dest.read_bytes() == data:
            self.same += 1
            return
        self.changed += dest.is_file()
        self.new += not dest.is_file()
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)


def lay_out_refs(src: GitSource, commit: str, tree: str, dest: Path, w: Writer) -> int:
    names = [n for n in src.ls(commit, tree) if n.endswith(".py")]
    for n in names:
        w.write(dest / n, src.show(commit, f"{tree}/{n}"))
    return len(names)


def lay_out_run(src: GitSource, commit: str, run: str, dest: Path, w: Writer) -> int:
    """The run's kernels in KernelBench naming plus its eval_results.json; returns #kernels."""
    names = src.ls(commit, run)
    kernels = 0
    for n in names:
        parsed = parse_kernel_name(n)
        if parsed:
            w.write(dest / layout_name(*parsed), src.show(commit, f"{run}/{n}"))
            kernels += 1
    for n in ("eval_results.json", "detailed_results.json"):
        if n in names:
            raw = json.loads(src.show(commit, f"{run}/{n}"))
            text = json.dumps(normalize_results(raw, n), indent=1, sort_keys=True) + "\n"
            w.write(dest / "eval_results.json", text.encode())
            break
    return kernels


def read_label_rows(bench_dir: Path) -> list[dict]:
    rows = []
    for f in sorted(bench_dir.glob("labels_*.csv")):
        with f.open(newline="") as fh:
            rows += [r for r in csv.DictReader(fh) if r.get("repo") and r.get("path")]
    return rows


def fetch(sources: dict, rows: list[dict], data_root: Path, mirror_root: Path | None,
          cache: Path, log=print, offline: bool = False) -> list[str]:
    """Lays everything out; returns the one-sentence errors (missing repos, commits, files)."""
    w, errors, opened = Writer(), [], {}

    def source(repo: str, commit: str) -> GitSource | None:
        key = (repo, commit)
        if key not in opened:
            try:
                opened[key] = open_source(repo, commit, mirror_root, cache, offline)
            except SourceError as e:
                opened[key] = None
                errors.append(str(e))
                log(f"MISSING: {e}")
        return opened[key]

    up = sources["upstream"]
    up_src = source(up["repo"], up["commit"])
    if up_src:
        n = lay_out_refs(up_src, up["commit"], up["level3"], data_root / "upstream/KernelBench/level3", w)
        for f in up.get("files", []):
            w.write(data_root / "upstream" / Path(f).name, up_src.show(up["commit"], f))
        log(f"upstream {up['repo']}@{up['commit'][:12]}: {n} level3 references, "
            f"{len(up.get('files', []))} file(s)")
    for repo, spec in sources.get("repos", {}).items():
        commit, src = spec["commit"], source(repo, spec["commit"])
        if src is None:
            continue
        refs_dest = data_root / slug(repo) / "KernelBench" / "level3"
        try:
            n = lay_out_refs(src, commit, spec["level3"], refs_dest, w) if spec.get("level3") else 0
        except SourceError:
            n = 0
        if n == 0 and up_src:  # a fork without its own references uses upstream's
            n = lay_out_refs(up_src, up["commit"], up["level3"], refs_dest, w)
        log(f"{repo}@{commit[:12]}: {n} level3 references")
        for run in spec.get("runs", []):
            try:
                k = lay_out_run(src, commit, run, data_root / slug(repo) / run, w)
                log(f"  {run}: {k} kernels")
            except SourceError as e:
                errors.append(str(e))
                log(f"MISSING: {e}")
    for r in rows:
        dest = local_path(data_root, r["repo"], r["path"])
        if dest in w.written:
            continue
        src = source(r["repo"], r["commit"])
        if src is None:
            continue
        try:
            w.write(dest, src.show(r["commit"], r["path"]))
        except SourceError as e:
            errors.append(str(e))
            log(f"MISSING: {e}")
    log(f"laid out {len(w.written)} files under {data_root}: {w.new} new, {w.changed} changed, "
        f"{w.same} unchanged; {len(errors)} missing")
    return errors


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mirror-root", type=Path, default=None,
                    help="local bare mirrors, layout <owner>+<name>/repo (e.g. /work/.mirror)")
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache/kernelmine/real_code",
                    help="where bare clones go when there is no mirror")
    ap.add_argument("--offline", action="store_true", help="never git clone; mirrors and cache only")
    ap.add_argument("--sources", type=Path, default=BENCH / "sources.yaml")
    ap.add_argument("--labels-dir", type=Path, default=BENCH, help="folder of labels_*.csv")
    ap.add_argument("--data", type=Path, default=BENCH / "data", help="output (git-ignored)")
    a = ap.parse_args(argv)
    sources = yaml.safe_load(a.sources.read_text())
    errors = fetch(sources, read_label_rows(a.labels_dir), a.data, a.mirror_root, a.cache,
                   offline=a.offline)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
