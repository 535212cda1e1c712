-- Whether a subscription is to the Premium price: only those give Premium. Rows so far were
-- created by Zenbu's own Checkout, for that price.
ALTER TABLE stripe_subscriptions ADD COLUMN premium_price boolean NOT NULL DEFAULT true;
