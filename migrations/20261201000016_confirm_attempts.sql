-- Sign-up confirmations are throttled too (per network; `email` holds the link's token hash).
ALTER TABLE auth_attempts
    DROP CONSTRAINT auth_attempts_kind_check,
    ADD CONSTRAINT auth_attempts_kind_check CHECK (kind IN ('login', 'signup', 'confirm'));
