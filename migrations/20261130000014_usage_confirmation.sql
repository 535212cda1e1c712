-- Two-phase metering: a reservation is confirmed once its search has answered. An unconfirmed
-- reservation counts only while its search may still be running (1 minute), so a search that
-- dies with the database (or the app) gives its unit back by itself, and nothing is lost.
ALTER TABLE search_usage ADD COLUMN confirmed_at timestamptz;
UPDATE search_usage SET confirmed_at = counted_at WHERE refunded_at IS NULL;
