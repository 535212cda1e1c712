-- Premium through Stripe: customers and subscriptions as Stripe last reported them, the webhook
-- events already handled, and failed payments.

ALTER TABLE users
    ADD COLUMN stripe_customer_id     text UNIQUE,
    ADD COLUMN stripe_subscription_id text;
CREATE INDEX users_stripe_subscription ON users (stripe_subscription_id);

-- The newest known state of each subscription. `event_created` is the creation time (Unix
-- seconds) of the event the state came from: an older event never overwrites a newer state, so
-- events delivered out of order cannot leave a wrong plan. A user's plan is derived from this.
CREATE TABLE stripe_subscriptions (
    id                 text        PRIMARY KEY,
    customer_id        text        NOT NULL,
    status             text        NOT NULL,
    current_period_end timestamptz,
    event_created      bigint      NOT NULL,
    updated_at         timestamptz NOT NULL DEFAULT now()
);

-- Every webhook event handled, by id: a replayed event is acknowledged and ignored.
CREATE TABLE stripe_events (
    id          text        PRIMARY KEY,
    type        text        NOT NULL,
    created     bigint      NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now()
);

-- invoice.payment_failed, as recorded: the account page tells the user.
CREATE TABLE payment_failures (
    event_id        text        PRIMARY KEY REFERENCES stripe_events (id),
    invoice_id      text,
    customer_id     text,
    subscription_id text,
    failed_at       timestamptz NOT NULL
);
CREATE INDEX payment_failures_customer ON payment_failures (customer_id, failed_at);
