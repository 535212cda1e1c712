-- The page a counted search served when the results cache did not keep it (a degraded page:
-- its translation failed, or its rerank stage ran out of time), kept with its unit while a
-- repeat of the query is free (3 minutes), so that a free repeat shows that page instead of
-- running the pipeline again. Cleared by the retention sweep after an hour.
ALTER TABLE search_usage ADD COLUMN served jsonb;
CREATE INDEX search_usage_served ON search_usage (counted_at) WHERE served IS NOT NULL;
