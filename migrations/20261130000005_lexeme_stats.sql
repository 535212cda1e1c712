-- How many documents hold each lexeme (refreshed by ingest when documents change): queries keep
-- only their rarer words, which carry the meaning and keep OR queries cheap.
CREATE TABLE lexeme_stats (
    lexeme    text    PRIMARY KEY,
    documents integer NOT NULL
);
INSERT INTO lexeme_stats (lexeme, documents)
SELECT word, ndoc FROM ts_stat('SELECT lexical FROM documents');
