-- A user whose address changed while Stripe still has the old one on their customers (receipts
-- and the billing portal's mail go there): set with the change, cleared once every customer of
-- the user has the new address (at once, or by the next reconciliation if Stripe failed).
ALTER TABLE users ADD COLUMN stripe_email_stale boolean NOT NULL DEFAULT false;
