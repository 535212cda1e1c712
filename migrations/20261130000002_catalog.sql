-- The catalog: one row per anime with AniList's facts, its relation edges, franchises, premises
-- and the one document per anime that search indexes.

CREATE TABLE anime (
    id               integer PRIMARY KEY,           -- AniList id
    id_mal           integer,
    title_romaji     text,
    title_english    text,
    title_native     text,
    synonyms         text[]  NOT NULL DEFAULT '{}',
    format           text,
    season           text,
    season_year      integer,
    start_year       integer,
    start_month      integer,
    start_day        integer,
    description_raw  text,                          -- as AniList sends it (HTML)
    description      text,                          -- sanitised plain text
    genres           text[]  NOT NULL DEFAULT '{}',
    tags             jsonb   NOT NULL DEFAULT '[]', -- [{name, rank, category, isGeneralSpoiler, isMediaSpoiler}]
    average_score    integer,
    popularity       integer,
    is_adult         boolean NOT NULL DEFAULT false,
    franchise_root_id integer,                      -- NULL when the anime stands alone
    raw              jsonb   NOT NULL,              -- the Media object as received
    source_hash      text    NOT NULL,              -- sha256 of `raw`: unchanged input, no write
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- Edges as AniList gives them; the related anime may be outside the catalog, so no foreign key.
CREATE TABLE anime_relations (
    anime_id       integer NOT NULL REFERENCES anime (id) ON DELETE CASCADE,
    related_id     integer NOT NULL,
    relation_type  text    NOT NULL,
    related_format text,
    PRIMARY KEY (anime_id, related_id, relation_type)
);
CREATE INDEX anime_relations_related ON anime_relations (related_id);

-- Connected groups of two or more anime; keyed by the root (first) entry.
CREATE TABLE franchises (
    root_id      integer PRIMARY KEY REFERENCES anime (id) ON DELETE CASCADE,
    member_count integer NOT NULL
);
ALTER TABLE anime
    ADD CONSTRAINT anime_franchise_fk FOREIGN KEY (franchise_root_id)
    REFERENCES franchises (root_id) ON DELETE SET NULL DEFERRABLE INITIALLY DEFERRED;
CREATE INDEX anime_franchise ON anime (franchise_root_id);

-- A premise is made once per franchise, generator (local method or LLM model) and inputs.
CREATE TABLE franchise_premises (
    root_id     integer NOT NULL REFERENCES franchises (root_id) ON DELETE CASCADE,
    generator   text    NOT NULL,
    inputs_hash text    NOT NULL,
    premise     text    NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (root_id, generator, inputs_hash)
);

-- The searchable document: template output, and sha256(embedding model + text).
CREATE TABLE documents (
    anime_id     integer PRIMARY KEY REFERENCES anime (id) ON DELETE CASCADE,
    body         text    NOT NULL,
    model        text    NOT NULL,
    content_hash text    NOT NULL,
    built_at     timestamptz NOT NULL DEFAULT now()
);
