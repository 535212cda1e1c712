-- The password is chosen on the page the sign-up link opens, not in the sign-up request: whoever
-- asks for an account for an address must not know the password of the account it becomes.
DELETE FROM pending_signups;
ALTER TABLE pending_signups DROP COLUMN password_hash;
