-- Each synopsis translated to Spanish by Apertium at ingest (catalog::spanish::synopses), shown
-- on the anime page of the Spanish interface marked as machine-translated, with the original a
-- click away. source_hash names the English text and the translator it was made from, so an
-- unchanged synopsis is never translated again.
CREATE TABLE synopses_es (
    anime_id    integer PRIMARY KEY REFERENCES anime (id) ON DELETE CASCADE,
    description text    NOT NULL,
    source_hash text    NOT NULL
);
