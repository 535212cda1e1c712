-- The catalog version (part of the results cache's key) moved on every INSERT, UPDATE or DELETE
-- statement on the catalog tables, even one that changed no row: a no-change re-ingest emptied
-- the results cache unless every writer checked before writing. It now moves only when a
-- statement changed rows (seen through its transition table); TRUNCATE always counts.
CREATE FUNCTION bump_catalog_version_if_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM changed) THEN
        UPDATE catalog_version SET version = version + 1;
    END IF;
    RETURN NULL;
END
$$;

DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['anime', 'documents', 'embeddings', 'lexeme_stats'] LOOP
        EXECUTE format('DROP TRIGGER %I ON %I', t || '_changed', t);
        EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON %I REFERENCING NEW TABLE AS changed
                        FOR EACH STATEMENT EXECUTE FUNCTION bump_catalog_version_if_changed()',
                       t || '_inserted', t);
        EXECUTE format('CREATE TRIGGER %I AFTER UPDATE ON %I REFERENCING NEW TABLE AS changed
                        FOR EACH STATEMENT EXECUTE FUNCTION bump_catalog_version_if_changed()',
                       t || '_updated', t);
        EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON %I REFERENCING OLD TABLE AS changed
                        FOR EACH STATEMENT EXECUTE FUNCTION bump_catalog_version_if_changed()',
                       t || '_deleted', t);
        EXECUTE format('CREATE TRIGGER %I AFTER TRUNCATE ON %I
                        FOR EACH STATEMENT EXECUTE FUNCTION bump_catalog_version()',
                       t || '_truncated', t);
    END LOOP;
END
$$;
