"""Explicit pyarrow schemas of the dataset tables. Bump SCHEMA_VERSION on any change.

Nested records (chat messages, harness results, evidence, findings, plans) are stored as JSON
strings: DuckDB reads them with ``->>`` / ``json_extract`` and the schema stays stable while
those records grow.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 3  # 2: samples gained subtask_index, prev_code_hash, negative, contamination, template_version
                    # 3: the imports table (programs scored by `eval <run dir | tree | .jsonl>`)

# Provenance carried by every row (DESIGN.md: a figure without provenance is not reproducible).
PROVENANCE = [
    pa.field("run_id", pa.string()),
    pa.field("round", pa.int32()),
    pa.field("policy", pa.string()),          # model name + checkpoint id
    pa.field("task_hash", pa.string()),
    pa.field("gpu", pa.string()),
    pa.field("torch", pa.string()),
    pa.field("cuda", pa.string()),
    pa.field("harness_version", pa.string()),
    pa.field("reward_version", pa.string()),
    pa.field("schema_version", pa.int32()),
]

_ts = pa.timestamp("us", tz="UTC")

RUNS = pa.schema([
    pa.field("run_id", pa.string()),
    pa.field("round", pa.int32()),
    pa.field("command", pa.string()),
    pa.field("config_json", pa.string()),
    pa.field("started_at", _ts),
    pa.field("host", pa.string()),
    pa.field("kernelmine_version", pa.string()),
    pa.field("schema_version", pa.int32()),
])

TRAJECTORIES = pa.schema([
    pa.field("trajectory_id", pa.string()),
    pa.field("task_id", pa.string()),
    pa.field("sample_index", pa.int32()),
    pa.field("seed", pa.int64()),
    pa.field("stop_reason", pa.string()),
    pa.field("n_turns", pa.int32()),
    pa.field("best_turn", pa.int32()),
    pa.field("best_speedup", pa.float64()),
    pa.field("best_correct", pa.bool_()),
    pa.field("best_code", pa.string()),
    pa.field("plan_json", pa.string()),
    pa.field("started_at", _ts),
    pa.field("ended_at", _ts),
    pa.field("wall_s", pa.float64()),
    *PROVENANCE,
])

TURNS = pa.schema([
    pa.field("turn_id", pa.string()),
    pa.field("trajectory_id", pa.string()),
    pa.field("task_id", pa.string()),
    pa.field("turn_index", pa.int32()),
    pa.field("role", pa.string()),               # planner | coder | verifier
    pa.field("action", pa.string()),             # draft | revise | plan | replan | verify
    pa.field("subtask_index", pa.int32()),
    pa.field("subtask_json", pa.string()),
    pa.field("parent_turn_id", pa.string()),
    pa.field("messages_json", pa.string()),      # the full prompt, as chat messages
    pa.field("response", pa.string()),
    pa.field("code", pa.string()),               # extracted ModelNew source, null if malformed
    pa.field("malformed", pa.string()),          # why extraction failed, null if it did not
    pa.field("result_json", pa.string()),        # harness EvalResult
    pa.field("feedback_json", pa.string()),      # structured Verifier feedback
    pa.field("status", pa.string()),
    pa.field("speedup", pa.float64()),
    pa.field("prompt_tokens", pa.int64()),
    pa.field("completion_tokens", pa.int64()),
    pa.field("latency_s", pa.float64()),
    pa.field("started_at", _ts),
    pa.field("ended_at", _ts),
    *PROVENANCE,
])

SAMPLES = pa.schema([
    pa.field("sample_id", pa.string()),
    pa.field("skill", pa.int8()),                # 1: task -> code, 2: feedback -> better code
    pa.field("task_id", pa.string()),
    pa.field("trajectory_id", pa.string()),
    pa.field("turn_id", pa.string()),
    pa.field("parent_turn_id", pa.string()),
    pa.field("messages_json", pa.string()),      # rendered chat prompt
    pa.field("response", pa.string()),
    pa.field("code", pa.string()),
    pa.field("code_hash", pa.string()),          # normalized code hash (dedup key)
    pa.field("reference_hash", pa.string()),
    pa.field("reference_structural_hash", pa.string()),
    pa.field("source_status", pa.string()),      # harness status when mined
    pa.field("source_speedup", pa.float64()),
    pa.field("subtask_index", pa.int32()),
    pa.field("prev_code_hash", pa.string()),     # Skill 2: normalized hash of the previous code
    pa.field("negative", pa.bool_()),            # the mined candidate failed (kept as a negative)
    pa.field("contamination", pa.string()),      # null | exact | structural (kept under warn)
    pa.field("template_version", pa.string()),
    *PROVENANCE,
])

SCORES = pa.schema([
    pa.field("score_id", pa.string()),
    pa.field("sample_id", pa.string()),
    pa.field("scorer_version", pa.string()),
    pa.field("skill", pa.int8()),
    pa.field("task_id", pa.string()),
    pa.field("status", pa.string()),
    pa.field("correct", pa.bool_()),
    pa.field("speedup", pa.float64()),
    pa.field("speedup_vs_compile", pa.float64()),
    pa.field("runtime_us", pa.float64()),
    pa.field("ref_runtime_us", pa.float64()),
    pa.field("ref_compile_runtime_us", pa.float64()),
    pa.field("rule_reward", pa.float64()),
    pa.field("rubric_anti_hacking", pa.float64()),
    pa.field("rubric_engineering", pa.float64()),
    pa.field("rubric_coverage", pa.float64()),
    pa.field("rubric_compliance", pa.float64()),
    pa.field("rubric_fallback", pa.bool_()),
    pa.field("major_hack", pa.bool_()),
    pa.field("hack_categories", pa.list_(pa.string())),
    pa.field("findings_json", pa.string()),
    pa.field("reward", pa.float64()),
    pa.field("result_json", pa.string()),
    pa.field("scored_at", _ts),
    *PROVENANCE,
])

CHECKPOINTS = pa.schema([
    pa.field("checkpoint_id", pa.string()),
    pa.field("base_model", pa.string()),
    pa.field("adapter_path", pa.string()),
    pa.field("step", pa.int64()),
    pa.field("reward_mean", pa.float64()),
    pa.field("reward_std", pa.float64()),
    pa.field("data_hash", pa.string()),
    pa.field("metadata_json", pa.string()),
    pa.field("created_at", _ts),
    *PROVENANCE,
])

# One row per program found by ``python -m mining eval <run dir | tree | file.jsonl>``: where it
# came from and the verdict the source recorded (KernelBench's eval_results.json), beside this
# toolkit's own verdict in ``scores`` (join on sample_id). A program that could not be evaluated
# (unreadable, no ModelNew, unknown task) has ``error`` set and no samples/scores row.
IMPORTS = pa.schema([
    pa.field("sample_id", pa.string()),
    pa.field("task_id", pa.string()),            # null when the task could not be resolved
    pa.field("source_kind", pa.string()),        # kernelbench_run | tree | jsonl
    pa.field("source_path", pa.string()),        # the program's file (absolute)
    pa.field("source_key", pa.string()),         # its key within the source: file name, or jsonl:<line>
    pa.field("source_run", pa.string()),         # KernelBench run name / tree or JSONL name
    pa.field("producer", pa.string()),           # producing model when the source says it
    pa.field("level", pa.int32()),
    pa.field("problem_id", pa.int32()),
    pa.field("sample_index", pa.int32()),        # KernelBench sample_id
    pa.field("task_ref", pa.string()),           # the task as the source named it
    pa.field("code_hash", pa.string()),
    pa.field("error", pa.string()),              # one sentence: why it was not evaluated
    pa.field("kb_compiled", pa.bool_()),         # KernelBench's recorded verdict (null: none recorded)
    pa.field("kb_correct", pa.bool_()),
    pa.field("kb_runtime_ms", pa.float64()),     # KernelBench `runtime` (CUDA-event ms; -1 -> null)
    pa.field("kb_ref_runtime_ms", pa.float64()),
    pa.field("kb_speedup", pa.float64()),        # recorded, or ref_runtime / runtime when both are
    pa.field("kb_hardware", pa.string()),
    pa.field("kb_metadata_json", pa.string()),   # KernelBench's metadata (errors, max_difference, ...)
    pa.field("imported_at", _ts),
    *PROVENANCE,
])

TABLES: dict[str, pa.Schema] = {
    "runs": RUNS,
    "trajectories": TRAJECTORIES,
    "turns": TURNS,
    "samples": SAMPLES,
    "scores": SCORES,
    "checkpoints": CHECKPOINTS,
    "imports": IMPORTS,
}

# The column that identifies a row; readers keep one row per key (compaction may leave both).
PRIMARY_KEY = {
    "runs": "run_id",
    "trajectories": "trajectory_id",
    "turns": "turn_id",
    "samples": "sample_id",
    "scores": "score_id",
    "checkpoints": "checkpoint_id",
    "imports": "sample_id",
}
