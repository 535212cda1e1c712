-- The first four characters of each entry's romaji and English title, lower-cased: two titles of
-- one work ("Made in Abyss", "Made in Abyss Movie 1: …") share them, so search finds the parts
-- of its leading results (server/src/search/parts.rs) through these instead of scanning the
-- catalog (12–15 ms a page by scan on the shared catalog).
CREATE INDEX anime_romaji_head ON anime (left(lower(title_romaji), 4));
CREATE INDEX anime_english_head ON anime (left(lower(title_english), 4));
