-- Speedup percentiles of correct samples, against eager and against torch.compile, by skill.
-- python -m mining query speedup_percentiles
SELECT skill,
       count(*)                                      AS n_correct,
       quantile_cont(speedup, 0.10)                  AS p10,
       quantile_cont(speedup, 0.50)                  AS p50,
       quantile_cont(speedup, 0.90)                  AS p90,
       quantile_cont(speedup, 0.99)                  AS p99,
       quantile_cont(speedup_vs_compile, 0.50)       AS p50_vs_compile,
       quantile_cont(speedup_vs_compile, 0.90)       AS p90_vs_compile
FROM scores
WHERE correct AND NOT coalesce(major_hack, false) AND speedup IS NOT NULL
GROUP BY skill
ORDER BY skill
