-- Hack rate by category: share of scored samples with at least one finding of that category.
-- python -m mining query hack_rate
WITH total AS (SELECT count(*) AS n FROM scores),
hits AS (
  SELECT DISTINCT score_id, unnest(hack_categories) AS category, major_hack FROM scores
)
SELECT category,
       count(DISTINCT score_id)                         AS n_samples,
       count(DISTINCT score_id) / any_value(total.n)    AS rate,
       count(DISTINCT CASE WHEN major_hack THEN score_id END) AS n_major
FROM hits, total
GROUP BY category
ORDER BY rate DESC, category
