-- pgvector: stores embeddings and gives search its HNSW indexes.
CREATE EXTENSION IF NOT EXISTS vector;
