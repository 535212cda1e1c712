-- The fine-tuned model is retrained with passage positives (e5-small-zenbu-2, issue 38, run 3):
-- its vectors get their own HNSW indexes, and the first version's (never the default) go.
DROP INDEX IF EXISTS embeddings_hnsw_e5_small_zenbu_1;
DROP INDEX IF EXISTS passage_embeddings_hnsw_e5_small_zenbu_1;
DELETE FROM passage_embeddings WHERE model = 'e5-small-zenbu-1';
DELETE FROM embeddings WHERE model = 'e5-small-zenbu-1';
CREATE INDEX embeddings_hnsw_e5_small_zenbu_2 ON embeddings
    USING hnsw ((embedding::vector(384)) vector_cosine_ops) WITH (m = 16, ef_construction = 200)
    WHERE model = 'e5-small-zenbu-2';
CREATE INDEX passage_embeddings_hnsw_e5_small_zenbu_2 ON passage_embeddings
    USING hnsw ((embedding::vector(384)) vector_cosine_ops) WITH (m = 16, ef_construction = 200)
    WHERE model = 'e5-small-zenbu-2';
