-- Disagreements with KernelBench's recorded verdicts, counted per imported run and kind, out of
-- the programs of that run that carry a KernelBench verdict and a score here.
-- python -m mining query disagreement_counts     (the rows: python -m mining query disagreements)
WITH j AS (
  SELECT i.source_run, i.kb_correct, s.correct, s.reward, s.major_hack, s.scorer_version
  FROM imports i JOIN scores s USING (sample_id)
  WHERE i.kb_correct IS NOT NULL
)
SELECT source_run, scorer_version,
       count(*)                                                     AS n_both,
       count(*) FILTER (WHERE correct AND NOT kb_correct)           AS correct_here_not_kb,
       count(*) FILTER (WHERE kb_correct AND NOT correct)           AS correct_kb_not_here,
       count(*) FILTER (WHERE NOT kb_correct AND reward > 0)        AS paid_kb_incorrect,
       count(*) FILTER (WHERE kb_correct AND major_hack)            AS hack_kb_accepted
FROM j
GROUP BY source_run, scorer_version
ORDER BY source_run, scorer_version
