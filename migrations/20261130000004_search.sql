-- Search: the lexical index of each document, every title for trigram matching, and vectors per
-- embedding model.

-- Titles and synonyms (weight A), genres and themes (B), premise and synopsis (C), built at
-- ingest with the 'english' configuration (the documents are English). lexical_hash says which
-- input built it, so a no-change ingest rewrites nothing.
ALTER TABLE documents ADD COLUMN lexical tsvector NOT NULL DEFAULT ''::tsvector;
ALTER TABLE documents ADD COLUMN lexical_hash text;
CREATE INDEX documents_lexical ON documents USING gin (lexical);

-- One row per distinct title or synonym, lower-cased, for typo-tolerant title matching.
CREATE TABLE anime_titles (
    anime_id integer NOT NULL REFERENCES anime (id) ON DELETE CASCADE,
    title    text    NOT NULL,
    PRIMARY KEY (anime_id, title)
);
CREATE INDEX anime_titles_trigram ON anime_titles USING gin (title gin_trgm_ops);

-- OR over a set of tsqueries (queries match documents holding any of their words).
CREATE AGGREGATE tsquery_or_all (tsquery) (SFUNC = tsquery_or, STYPE = tsquery);

-- One vector per anime and model, computed from the document with this content hash. The column
-- has no fixed dimension so every model fits; each model gets a partial HNSW index over its own
-- dimension, which queries reach by repeating the index's cast and model predicate.
CREATE TABLE embeddings (
    anime_id     integer NOT NULL REFERENCES anime (id) ON DELETE CASCADE,
    model        text    NOT NULL,
    content_hash text    NOT NULL,
    embedding    vector  NOT NULL,
    embedded_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (anime_id, model)
);
CREATE INDEX embeddings_hnsw_multilingual_e5_small ON embeddings
    USING hnsw ((embedding::vector(384)) vector_cosine_ops) WITH (m = 16, ef_construction = 200)
    WHERE model = 'multilingual-e5-small';
CREATE INDEX embeddings_hnsw_text_embedding_3_small ON embeddings
    USING hnsw ((embedding::vector(1536)) vector_cosine_ops) WITH (m = 16, ef_construction = 200)
    WHERE model = 'text-embedding-3-small';
