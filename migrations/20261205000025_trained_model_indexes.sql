-- Vectors of the fine-tuned local model (server/src/search/e5.rs, TRAINED_MODEL_NAME) get HNSW
-- indexes of their own, like every model's: queries reach them by repeating the cast and the
-- model predicate (server/src/search/vector.rs).
CREATE INDEX embeddings_hnsw_e5_small_zenbu_1 ON embeddings
    USING hnsw ((embedding::vector(384)) vector_cosine_ops) WITH (m = 16, ef_construction = 200)
    WHERE model = 'e5-small-zenbu-1';
CREATE INDEX passage_embeddings_hnsw_e5_small_zenbu_1 ON passage_embeddings
    USING hnsw ((embedding::vector(384)) vector_cosine_ops) WITH (m = 16, ef_construction = 200)
    WHERE model = 'e5-small-zenbu-1';
