-- Accounts and the search quota.

CREATE TABLE users (
    id            bigserial   PRIMARY KEY,
    email         text        NOT NULL UNIQUE,  -- normalised: trimmed, lower case
    password_hash text        NOT NULL,         -- argon2id PHC string
    plan          text        NOT NULL DEFAULT 'free' CHECK (plan IN ('free', 'premium')),
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- One row per counted text search. The subject is 'user:<id>' or 'visitor:<id>' (an anonymous
-- visitor's signed cookie); query_key hashes the normalised query and its filters. A search that
-- fails outright gives its unit back (refunded_at), and the row then counts for nothing.
CREATE TABLE search_usage (
    id          bigserial   PRIMARY KEY,
    subject     text        NOT NULL,
    query_key   text        NOT NULL,
    counted_at  timestamptz NOT NULL,
    refunded_at timestamptz
);
CREATE INDEX search_usage_subject_time ON search_usage (subject, counted_at);
