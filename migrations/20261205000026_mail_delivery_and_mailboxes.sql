-- Accounts that work on a real server (issue 39): mail is delivered, one mailbox is one account,
-- and passwords can be reset.

-- Delivery state of each queued mail (server/src/mail/delivery.rs). A worker claims due rows with
-- FOR UPDATE SKIP LOCKED, so several app servers can run one each.
ALTER TABLE mail_outbox
    ADD COLUMN html_body       text,
    ADD COLUMN attempts        int         NOT NULL DEFAULT 0,
    ADD COLUMN next_attempt_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN last_error      text,
    ADD COLUMN failed_at       timestamptz;
-- Rows queued before this migration were never delivered and their links may have expired:
-- they are not sent now, days late.
UPDATE mail_outbox SET failed_at = now(), last_error = 'queued before mail delivery existed'
 WHERE sent_at IS NULL;
CREATE INDEX mail_outbox_due ON mail_outbox (next_attempt_at, id)
    WHERE sent_at IS NULL AND failed_at IS NULL;

-- The mailbox an address delivers to: `+tags` dropped, and for Gmail the dots too (Gmail ignores
-- both). Accounts and per-address throttles are counted by mailbox, so `ana+1@…`, `ana+2@…` are
-- not new people. The one definition of the folding: the server asks PostgreSQL for it.
CREATE FUNCTION mailbox_of(email text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN CASE
        WHEN split_part(email, '@', 2) IN ('gmail.com', 'googlemail.com')
            THEN replace(split_part(split_part(email, '@', 1), '+', 1), '.', '') || '@gmail.com'
        ELSE split_part(split_part(email, '@', 1), '+', 1) || '@' || split_part(email, '@', 2)
    END;

ALTER TABLE users ADD COLUMN mailbox text GENERATED ALWAYS AS (mailbox_of(email)) STORED;
CREATE INDEX users_mailbox ON users (mailbox);

-- The signed-in sessions of each user: listed on the account page, ended one by one, all at once
-- by a password reset or change. The tower-sessions row holds only this row's key; a session
-- whose row is gone is signed out.
CREATE TABLE user_sessions (
    key        text        PRIMARY KEY,  -- SHA-256 of the random key kept in the session
    user_id    bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    network    text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    last_seen  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX user_sessions_user ON user_sessions (user_id, created_at);

-- Password reset links (a 256-bit token, kept as its SHA-256), one hour each.
CREATE TABLE password_resets (
    token_hash text        PRIMARY KEY,
    user_id    bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX password_resets_user ON password_resets (user_id);

ALTER TABLE auth_attempts
    DROP CONSTRAINT auth_attempts_kind_check,
    ADD CONSTRAINT auth_attempts_kind_check
        CHECK (kind IN ('login', 'signup', 'confirm', 'reset', 'reset-confirm'));
