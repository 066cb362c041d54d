-- The console's sessions (CONTRACT §7 "Console"): a login with a token (the manager
-- token or one with console:read) is exchanged for a random session secret in an
-- HttpOnly cookie. Only the secret's SHA-256 is stored, so a copy of the database
-- opens no session. The session carries the scopes its token had at login (the
-- manager: every scope), and dies at expires_ms (expired rows are deleted by the
-- console as it meets them and by the login that makes a new one).
-- Never edit once applied: add a new file.
CREATE TABLE console_sessions (
    secret_hash  TEXT    NOT NULL PRIMARY KEY,  -- SHA-256 hex of the cookie's secret
    scopes       TEXT    NOT NULL,              -- space-separated; 'manager' = every scope
    token_id     INTEGER,                        -- the API token logged in with; NULL: the manager token
    created_ms   INTEGER  NOT NULL,
    expires_ms   INTEGER  NOT NULL
);
CREATE INDEX console_sessions_expiry ON console_sessions (expires_ms);
