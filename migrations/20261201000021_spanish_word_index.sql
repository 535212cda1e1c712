-- A second word index per document, in Spanish: most queries are Spanish and the catalog is
-- English, so a Spanish word matched an English synopsis only by accident. Ingest translates each
-- document with Apertium (catalog::spanish) and indexes the translation with the 'spanish'
-- configuration (titles A, the translated document C); the words of a Spanish query as typed
-- are searched here, their English translation in `lexical`. lexical_es_hash names the document
-- text and translator it was built from, so an unchanged document is never translated again.
ALTER TABLE documents ADD COLUMN lexical_es tsvector NOT NULL DEFAULT ''::tsvector;
ALTER TABLE documents ADD COLUMN lexical_es_hash text;
CREATE INDEX documents_lexical_es ON documents USING gin (lexical_es);

-- Document frequencies of the Spanish index, as lexeme_stats for the English one.
CREATE TABLE lexeme_stats_es (
    lexeme    text    PRIMARY KEY,
    documents integer NOT NULL
);
