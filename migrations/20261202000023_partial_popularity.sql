-- Member counts taken before an anime had gathered its members. A catalog's counts are taken at
-- one moment, and it shows as a run of latest start years where most records have none: in the
-- shared catalog every year up to 2020 has a count on at least 99% of its records, 2021 on 84%,
-- 2022 on 29%, later years on almost none. The counts those years do have are partial, taken while
-- the anime was new: median 2,777 members in 2022 against about 50,000 for 2016-2019 (*Bocchi the
-- Rock!* 468, *Ranking of Kings* 1,503), so the popularity prior ranked recent hits as obscure.
--
-- From the first year of that trailing run on (a year is complete when at least 90% of its records
-- have a count; the catalog's years sit at >= 99% or <= 84%), a record's count is partial: it gets
-- the same estimate as a record without one (the median count of anime scored within 2 points,
-- else the median count), taken over complete counts only, and search reads the larger of its
-- own count and the estimate (`catalog::popularity::MEMBERS_SQL`). When the latest year is
-- complete (a live AniList crawl, where every count is current) no count is partial.
--
-- `estimated_popularity` is now the estimate of every record whose count is missing or partial,
-- NULL for the others. The function is renamed: it estimates more than the missing ones.
DROP FUNCTION estimate_missing_popularity();

-- Recomputes every estimate from the catalog as it is (ingest calls it after loading: a new anime
-- moves the medians and may complete a year); returns how many changed.
CREATE FUNCTION estimate_popularity() RETURNS bigint LANGUAGE sql AS $$
    WITH years AS (
        SELECT coalesce(season_year, start_year) AS year,
               count(popularity) >= 0.9 * count(*) AS complete
        FROM anime
        WHERE coalesce(season_year, start_year) IS NOT NULL
        GROUP BY 1
    ),
    partial AS (
        SELECT min(year) AS from_year FROM years
        WHERE NOT complete
          AND year > coalesce((SELECT max(year) FROM years WHERE complete), -1)
    ),
    counted AS (
        SELECT a.id, a.average_score, a.popularity,
               a.popularity IS NULL
               OR coalesce(coalesce(a.season_year, a.start_year) >= p.from_year, false) AS estimated
        FROM anime a CROSS JOIN partial p
    ),
    known AS (
        SELECT average_score, popularity FROM counted WHERE NOT estimated
    ),
    overall AS (
        SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY popularity) AS median FROM known
    ),
    bands AS (
        SELECT s.score,
               (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY k.popularity) FROM known k
                 WHERE k.average_score BETWEEN s.score - 2 AND s.score + 2) AS median
        FROM (SELECT DISTINCT average_score AS score FROM counted
               WHERE estimated AND average_score IS NOT NULL) s
    ),
    estimates AS (
        SELECT c.id,
               CASE WHEN c.estimated THEN coalesce(b.median, o.median) END AS estimate
        FROM counted c CROSS JOIN overall o LEFT JOIN bands b ON b.score = c.average_score
    ),
    changed AS (
        UPDATE anime a SET estimated_popularity = e.estimate
        FROM estimates e
        WHERE a.id = e.id AND a.estimated_popularity IS DISTINCT FROM e.estimate
        RETURNING 1
    )
    SELECT count(*) FROM changed
$$;

SELECT estimate_popularity();
