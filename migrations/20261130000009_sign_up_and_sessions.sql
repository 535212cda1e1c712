-- Accounts, part 2: sessions, sign-up by emailed link, throttling of failed log-ins, mail.

-- tower-sessions' PostgreSQL store (the same table its `migrate()` creates, made here so every
-- database, test databases included, gets it from the migrations).
CREATE SCHEMA IF NOT EXISTS tower_sessions;
CREATE TABLE IF NOT EXISTS tower_sessions.session (
    id          text        PRIMARY KEY NOT NULL,
    data        bytea       NOT NULL,
    expiry_date timestamptz NOT NULL
);

-- A sign-up waits here until its emailed link is followed; only then is there a user. The link's
-- token is kept as its SHA-256, so a database leak gives no usable links.
CREATE TABLE pending_signups (
    token_hash    text        PRIMARY KEY,
    email         text        NOT NULL,
    password_hash text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL
);
CREATE INDEX pending_signups_email ON pending_signups (email);

-- Mail the app sends (sign-up links, "you already have an account"). No mail service is
-- reachable from here: a delivery worker would send rows with sent_at NULL.
CREATE TABLE mail_outbox (
    id         bigserial   PRIMARY KEY,
    recipient  text        NOT NULL,
    subject    text        NOT NULL,
    body       text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at    timestamptz
);
CREATE INDEX mail_outbox_recipient ON mail_outbox (recipient, id);

-- Attempts that count towards throttling: failed log-ins and sign-up requests, by normalised
-- email and by client network (an IPv4 address or an IPv6 /64).
CREATE TABLE auth_attempts (
    id           bigserial   PRIMARY KEY,
    kind         text        NOT NULL CHECK (kind IN ('login', 'signup')),
    email        text        NOT NULL,
    network      text        NOT NULL,
    attempted_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX auth_attempts_email ON auth_attempts (kind, email, attempted_at);
CREATE INDEX auth_attempts_network ON auth_attempts (kind, network, attempted_at);

-- The first counted search of each anonymous visitor id, and the network it came from: a new
-- id (cleared cookies) gets a fresh allowance only while its network has started fewer than a
-- set number of ids in the last day.
CREATE TABLE anonymous_starts (
    subject    text        PRIMARY KEY,
    network    text        NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX anonymous_starts_network ON anonymous_starts (network, started_at);
