-- Best correct, hack-free result per task (highest speedup vs eager).
-- python -m mining query best_per_task
SELECT task_id, sample_id, skill, round, speedup, speedup_vs_compile, reward, runtime_us,
       ref_runtime_us, ref_compile_runtime_us
FROM scores
WHERE correct AND NOT coalesce(major_hack, false) AND speedup IS NOT NULL
QUALIFY row_number() OVER (PARTITION BY task_id ORDER BY speedup DESC, sample_id) = 1
ORDER BY task_id
