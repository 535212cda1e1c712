-- Retention (server/src/retention.rs): a network address is kept only as long as a per-network
-- limit reads it (a day); the visitor's first-search row itself lives as long as its allowance.
ALTER TABLE anonymous_starts ALTER COLUMN network DROP NOT NULL;
CREATE INDEX mail_outbox_done ON mail_outbox (coalesce(sent_at, failed_at))
    WHERE sent_at IS NOT NULL OR failed_at IS NOT NULL;
CREATE INDEX search_usage_counted ON search_usage (counted_at);
