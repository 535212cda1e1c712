-- The second view (Universal Sentence Encoder multilingual v3, `search::second_view`): its
-- 512-dimensional vectors share the tables of every model, with HNSW indexes of their own.
CREATE INDEX embeddings_hnsw_usem3 ON embeddings
    USING hnsw ((embedding::vector(512)) vector_cosine_ops) WITH (m = 16, ef_construction = 200)
    WHERE model = 'usem3';
CREATE INDEX passage_embeddings_hnsw_usem3 ON passage_embeddings
    USING hnsw ((embedding::vector(512)) vector_cosine_ops) WITH (m = 16, ef_construction = 200)
    WHERE model = 'usem3';
