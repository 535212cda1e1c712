-- The network an anonymous search came from: anonymous searches are capped per network and day
-- whatever the ids (NULL for accounts).
ALTER TABLE search_usage ADD COLUMN network text;
CREATE INDEX search_usage_network ON search_usage (network, counted_at) WHERE network IS NOT NULL;
