-- Passages: each document also cut into sentence windows (catalog::passages), embedded one by
-- one, so a sentence of a long synopsis is found on its own and no part of a document goes
-- unembedded. Written with the document; its vectors are keyed by each passage's own content
-- hash, so an unchanged passage is never embedded again.
ALTER TABLE documents ADD COLUMN passages text[] NOT NULL DEFAULT '{}';

CREATE TABLE passage_embeddings (
    anime_id     integer NOT NULL REFERENCES anime (id) ON DELETE CASCADE,
    model        text    NOT NULL,
    passage      integer NOT NULL,  -- 1-based position in documents.passages
    content_hash text    NOT NULL,  -- of the model and the passage's text
    embedding    vector  NOT NULL,
    PRIMARY KEY (anime_id, model, passage)
);
CREATE INDEX passage_embeddings_hnsw_multilingual_e5_small ON passage_embeddings
    USING hnsw ((embedding::vector(384)) vector_cosine_ops) WITH (m = 16, ef_construction = 200)
    WHERE model = 'multilingual-e5-small';
CREATE INDEX passage_embeddings_hnsw_text_embedding_3_small ON passage_embeddings
    USING hnsw ((embedding::vector(1536)) vector_cosine_ops) WITH (m = 16, ef_construction = 200)
    WHERE model = 'text-embedding-3-small';
