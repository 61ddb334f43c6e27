-- Reward distribution by skill, round and task (one row per group).
-- python -m mining query reward_by_skill
SELECT skill, round, task_id,
       count(*)                                 AS n,
       avg(reward)                              AS reward_mean,
       stddev_samp(reward)                      AS reward_std,
       min(reward)                              AS reward_min,
       quantile_cont(reward, 0.5)               AS reward_p50,
       quantile_cont(reward, 0.9)               AS reward_p90,
       max(reward)                              AS reward_max,
       avg(CASE WHEN correct THEN 1.0 ELSE 0.0 END) AS correct_rate
FROM scores
GROUP BY skill, round, task_id
ORDER BY skill, round, task_id
