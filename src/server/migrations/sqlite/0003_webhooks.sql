-- Result webhooks (CONTRACT §4, 2026-12): a submission's callback_url, and the
-- outbox of `attempt.ended` events. The outbox row is written by a trigger on
-- the jobs table, so it is part of the very statement (and transaction) that
-- moves an attempt into Completed, Failed, Cancelled or Superseded, whichever
-- code path does it. The sender (src/server/webhooks.rs) fills delivery_id and
-- payload on its first try and reuses them on every retry.
ALTER TABLE submissions ADD COLUMN callback_url TEXT;

CREATE TABLE webhook_outbox (
    id                INTEGER PRIMARY KEY,
    job_id            INTEGER NOT NULL REFERENCES jobs (id),
    submission_id     INTEGER NOT NULL REFERENCES submissions (id),
    state             TEXT    NOT NULL,          -- the final state the attempt ended in
    callback_url      TEXT    NOT NULL,
    created_ms        INTEGER NOT NULL,          -- wall clock of the database
    delivery_id       TEXT,                      -- X-Judge-Delivery, set on the first try
    payload           TEXT,                      -- the exact body, set on the first try
    tries             INTEGER NOT NULL DEFAULT 0,
    next_try_ms       INTEGER NOT NULL DEFAULT 0,
    claimed_until_ms  INTEGER,                   -- a sender holds it until then
    delivered_ms      INTEGER,
    gave_up_ms        INTEGER,
    last_error        TEXT
);

CREATE INDEX webhook_outbox_due ON webhook_outbox (next_try_ms)
    WHERE delivered_ms IS NULL AND gave_up_ms IS NULL;

CREATE TRIGGER jobs_attempt_ended AFTER UPDATE OF state ON jobs
WHEN NEW.state IN ('Completed', 'Failed', 'Cancelled', 'Superseded')
     AND OLD.state IS NOT NEW.state
BEGIN
    INSERT INTO webhook_outbox (job_id, submission_id, state, callback_url, created_ms)
    SELECT NEW.id, NEW.submission_id, NEW.state, s.callback_url,
           CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
    FROM submissions s
    WHERE s.id = NEW.submission_id AND s.callback_url IS NOT NULL;
END;
