-- Hack rate per category and round (share of that round's scored samples).
-- python -m mining query hack_by_round
WITH per_round AS (SELECT round, count(*) AS n FROM scores GROUP BY round),
hits AS (SELECT DISTINCT score_id, round, unnest(hack_categories) AS category FROM scores)
SELECT hits.round, category, count(*) AS n_samples, count(*) / any_value(per_round.n) AS rate
FROM hits JOIN per_round USING (round)
GROUP BY hits.round, category
ORDER BY hits.round, category
