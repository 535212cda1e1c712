-- A subscription belongs to the user whose Checkout created it, and a user is Premium while any
-- of their subscriptions is active or trialing (a person may, by accident, pay twice).
ALTER TABLE stripe_subscriptions ADD COLUMN user_id bigint REFERENCES users (id) ON DELETE SET NULL;
CREATE INDEX stripe_subscriptions_user ON stripe_subscriptions (user_id);
CREATE INDEX stripe_subscriptions_customer ON stripe_subscriptions (customer_id);
