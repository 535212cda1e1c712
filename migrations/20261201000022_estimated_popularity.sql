-- An estimate of AniList's popularity (members) for anime whose record has none: 644 of the
-- shared catalog's 6,855, Frieren among them. Search weighs a popularity prior (the vector
-- branch's score and the reranker), and a missing value read as 0 ranked those anime as the most
-- obscure in the catalog. The estimate is the median popularity of the anime whose average score
-- is within 2 points of theirs (members and score go together: their correlation over the
-- catalog, log members against score, is 0.67), else the catalog's median. NULL when the
-- record has a popularity of its own, or when no anime has one.
ALTER TABLE anime ADD COLUMN estimated_popularity integer;

-- Recomputes every estimate from the catalog as it is (ingest calls it after loading, since a
-- new anime moves the medians); returns how many changed.
CREATE FUNCTION estimate_missing_popularity() RETURNS bigint LANGUAGE sql AS $$
    WITH known AS (
        SELECT average_score, popularity FROM anime WHERE popularity IS NOT NULL
    ),
    overall AS (
        SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY popularity) AS median FROM known
    ),
    bands AS (
        SELECT s.score,
               (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY k.popularity) FROM known k
                 WHERE k.average_score BETWEEN s.score - 2 AND s.score + 2) AS median
        FROM (SELECT DISTINCT average_score AS score FROM anime
               WHERE popularity IS NULL AND average_score IS NOT NULL) s
    ),
    estimates AS (
        SELECT a.id,
               CASE WHEN a.popularity IS NULL THEN coalesce(b.median, o.median) END AS estimate
        FROM anime a CROSS JOIN overall o LEFT JOIN bands b ON b.score = a.average_score
    ),
    changed AS (
        UPDATE anime a SET estimated_popularity = e.estimate
        FROM estimates e
        WHERE a.id = e.id AND a.estimated_popularity IS DISTINCT FROM e.estimate
        RETURNING 1
    )
    SELECT count(*) FROM changed
$$;

SELECT estimate_missing_popularity();
