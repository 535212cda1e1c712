-- The popularity search weighs (`catalog::popularity`): an anime's own member count or the
-- estimate, whichever is larger (`greatest` skips a NULL), else 0. One column every query reads,
-- rather than the expression pasted into each; stored, as PostgreSQL before 18 has no virtual
-- generated columns, and kept current by PostgreSQL whenever either count changes.
ALTER TABLE anime ADD COLUMN members integer
    GENERATED ALWAYS AS (coalesce(greatest(popularity, estimated_popularity), 0)) STORED;
