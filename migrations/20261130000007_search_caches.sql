-- Search caches in plain tables: every row carries an expiry; reads ignore expired rows and a
-- periodic sweep deletes them (no extension, no scheduler).

-- Bumped by any change to the catalog, its documents or vectors: cached results are stored with
-- the version they were computed at and never served for another.
CREATE TABLE catalog_version (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    version   bigint  NOT NULL
);
INSERT INTO catalog_version VALUES (true, 1);

CREATE FUNCTION bump_catalog_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE catalog_version SET version = version + 1;
    RETURN NULL;
END
$$;
CREATE TRIGGER anime_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON anime
    FOR EACH STATEMENT EXECUTE FUNCTION bump_catalog_version();
CREATE TRIGGER documents_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON documents
    FOR EACH STATEMENT EXECUTE FUNCTION bump_catalog_version();
CREATE TRIGGER embeddings_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON embeddings
    FOR EACH STATEMENT EXECUTE FUNCTION bump_catalog_version();

-- A query's vector per embedding model (the exact cleaned text: the model sees case).
CREATE TABLE query_embedding_cache (
    model      text        NOT NULL,
    query      text        NOT NULL,
    embedding  vector      NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (model, query)
);
CREATE INDEX query_embedding_cache_expiry ON query_embedding_cache (expires_at);

-- A page of results per normalised query, filters and pipeline (hashed into cache_key).
CREATE TABLE search_result_cache (
    cache_key       text        PRIMARY KEY,
    catalog_version bigint      NOT NULL,
    results         jsonb       NOT NULL,
    expires_at      timestamptz NOT NULL
);
CREATE INDEX search_result_cache_expiry ON search_result_cache (expires_at);
