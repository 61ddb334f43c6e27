-- Where this toolkit's verdict and KernelBench's recorded one (eval_results.json) disagree, one
-- row per imported program and kind (mining/ingest/verdicts.py KINDS says what each means):
-- correct_here_not_kb, correct_kb_not_here, paid_kb_incorrect, hack_kb_accepted.
-- python -m mining query disagreements        (counts: python -m mining query disagreement_counts)
WITH j AS (
  SELECT i.source_run, i.producer, i.task_id, i.problem_id, i.sample_index, i.source_path,
         i.kb_compiled, i.kb_correct, i.kb_speedup, s.scorer_version, s.status, s.correct,
         s.reward, s.speedup, s.major_hack, s.hack_categories, s.sample_id
  FROM imports i JOIN scores s USING (sample_id)
  WHERE i.kb_correct IS NOT NULL
),
k AS (
  SELECT 'correct_here_not_kb' AS kind, * FROM j WHERE correct AND NOT kb_correct
  UNION ALL SELECT 'correct_kb_not_here', * FROM j WHERE kb_correct AND NOT correct
  UNION ALL SELECT 'paid_kb_incorrect', * FROM j WHERE NOT kb_correct AND reward > 0
  UNION ALL SELECT 'hack_kb_accepted', * FROM j WHERE kb_correct AND major_hack
)
SELECT kind, source_run, producer, task_id, problem_id, sample_index, kb_compiled, kb_correct,
       status, correct, reward, speedup, kb_speedup, hack_categories, scorer_version, sample_id,
       source_path
FROM k
ORDER BY kind, source_run, problem_id, sample_index
