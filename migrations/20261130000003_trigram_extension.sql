-- pg_trgm: trigram similarity for fuzzy title matching ("mushi shi", one-letter typos).
CREATE EXTENSION IF NOT EXISTS pg_trgm;
