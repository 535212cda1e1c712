-- The lexical branch chooses its words by document frequency (lexeme_stats), so the stats shape
-- results like the documents do: a change retires cached result pages.
CREATE TRIGGER lexeme_stats_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON lexeme_stats
    FOR EACH STATEMENT EXECUTE FUNCTION bump_catalog_version();

-- Databases whose catalog was loaded before migration 5 have an empty lexeme_stats, and their
-- lexical branch finds nothing. Fill it once (ingest also refills it when it is empty).
INSERT INTO lexeme_stats (lexeme, documents)
SELECT word, ndoc FROM ts_stat('SELECT lexical FROM documents')
WHERE NOT EXISTS (SELECT 1 FROM lexeme_stats);
