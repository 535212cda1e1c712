-- Each anime's genres and tags as a sparse unit vector (tag and genre names hashed into 2^20
-- dimensions, tags weighted by rank), with an HNSW index: "similar to" reads these beside the
-- document vectors, because anime fans call similar share mood and themes more than plot.
ALTER TABLE documents ADD COLUMN themes sparsevec(1048576);
CREATE INDEX documents_themes_hnsw ON documents
    USING hnsw (themes sparsevec_cosine_ops) WITH (m = 16, ef_construction = 200);
