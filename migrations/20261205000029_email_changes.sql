-- A change of a user's address waits here until the link mailed to the new address is followed
-- (issue 39): the token is kept as its SHA-256, like every emailed link.
CREATE TABLE email_changes (
    token_hash text        PRIMARY KEY,
    user_id    bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    new_email  text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX email_changes_user ON email_changes (user_id);
