-- Networks each address has logged in from: failures at the address from elsewhere do not lock
-- its owner out on these (the per-address log-in limit does not apply there).
CREATE TABLE login_networks (
    email      text        NOT NULL,
    network    text        NOT NULL,
    last_login timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (email, network)
);
