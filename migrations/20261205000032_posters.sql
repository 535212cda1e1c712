-- Posters: AniList's coverImage and bannerImage, read from the Media object as received (the
-- crawler asks for them; the shared catalog and the demo have none). Generated, so import code
-- and the stored object cannot disagree, and `server ingest --refresh-images` only merges the
-- two fields into `raw`.
ALTER TABLE anime
    ADD COLUMN cover_url text GENERATED ALWAYS AS (raw -> 'coverImage' ->> 'large') STORED,
    ADD COLUMN cover_large_url text GENERATED ALWAYS AS (raw -> 'coverImage' ->> 'extraLarge') STORED,
    ADD COLUMN cover_color text GENERATED ALWAYS AS (raw -> 'coverImage' ->> 'color') STORED,
    ADD COLUMN banner_url text GENERATED ALWAYS AS (raw ->> 'bannerImage') STORED;
