-- The Checkout Sessions made for each user, so that a second "Go Premium" (another tab, a
-- double click) reuses the one still open instead of making a second subscription possible.
-- Closed by the webhook (completed or expired); open ones also end at their expiry.
CREATE TABLE checkout_sessions (
    id text PRIMARY KEY,
    user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    url text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    closed_at timestamptz
);
CREATE INDEX checkout_sessions_open ON checkout_sessions (user_id) WHERE closed_at IS NULL;
