-- The Server under a deep queue (issue 17). Never edit once applied: add a new file.
--
-- 1. The claim looks a job up by (language, id) and never walks past jobs it cannot
--    take. A Queued job whose `waits_for` sibling is still live (Queued or Running)
--    is `blocked = 1` and so outside the claimable index; the trigger below clears
--    the flag in the very statement that ends the sibling, whatever ends it.
-- 2. The reaper reads only the Running rows whose lease expired (an index on the
--    expiry), revocation only the Running rows of one runner.
-- 3. `GET /metrics` reads per-state counters kept by triggers in the statements that
--    change a state, instead of counting the whole history.

ALTER TABLE jobs ADD COLUMN blocked INTEGER NOT NULL DEFAULT 0;
UPDATE jobs SET blocked = 1
 WHERE state = 'Queued' AND waits_for IS NOT NULL
   AND (SELECT w.state FROM jobs w WHERE w.id = jobs.waits_for) IN ('Queued', 'Running');

DROP INDEX jobs_queued;
DROP INDEX jobs_running;
CREATE INDEX jobs_claimable ON jobs (language, id) WHERE state = 'Queued' AND blocked = 0;
CREATE INDEX jobs_blocked ON jobs (waits_for) WHERE blocked = 1;
CREATE INDEX jobs_lease_expiry ON jobs (lease_expires_ms) WHERE state = 'Running';
CREATE INDEX jobs_running_by_runner ON jobs (runner_id) WHERE state = 'Running';

DROP INDEX trials_queued;
DROP INDEX trials_running;
CREATE INDEX trials_claimable ON trials (language, id) WHERE state = 'Queued';
CREATE INDEX trials_lease_expiry ON trials (lease_expires_ms) WHERE state = 'Running';
CREATE INDEX trials_running_by_runner ON trials (runner_id) WHERE state = 'Running';

-- How many jobs / trials are in each state, now. One row per (kind, state): SQLite
-- has one writer at a time, so the rows are never contended.
CREATE TABLE state_counts (
    kind    TEXT    NOT NULL,          -- 'job' or 'trial'
    state   TEXT    NOT NULL,
    n       INTEGER NOT NULL,
    PRIMARY KEY (kind, state)
) WITHOUT ROWID;
INSERT INTO state_counts (kind, state, n)
SELECT k.column1, s.column1, 0
  FROM (VALUES ('job'), ('trial')) AS k,
       (VALUES ('Queued'), ('Running'), ('Completed'), ('Failed'), ('Cancelled'), ('Superseded')) AS s;
UPDATE state_counts SET n = (SELECT COUNT(*) FROM jobs WHERE jobs.state = state_counts.state)
 WHERE kind = 'job';
UPDATE state_counts SET n = (SELECT COUNT(*) FROM trials WHERE trials.state = state_counts.state)
 WHERE kind = 'trial';

CREATE TRIGGER jobs_count_insert AFTER INSERT ON jobs BEGIN
    UPDATE state_counts SET n = n + 1 WHERE kind = 'job' AND state = NEW.state;
END;
CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs BEGIN
    UPDATE state_counts SET n = n - 1 WHERE kind = 'job' AND state = OLD.state;
END;
CREATE TRIGGER jobs_state_change AFTER UPDATE OF state ON jobs
WHEN OLD.state IS NOT NEW.state BEGIN
    UPDATE state_counts SET n = n - 1 WHERE kind = 'job' AND state = OLD.state;
    UPDATE state_counts SET n = n + 1 WHERE kind = 'job' AND state = NEW.state;
    -- The attempt ended: the one waiting behind it becomes claimable.
    UPDATE jobs SET blocked = 0
     WHERE waits_for = NEW.id AND blocked = 1
       AND OLD.state IN ('Queued', 'Running') AND NEW.state NOT IN ('Queued', 'Running');
END;

CREATE TRIGGER trials_count_insert AFTER INSERT ON trials BEGIN
    UPDATE state_counts SET n = n + 1 WHERE kind = 'trial' AND state = NEW.state;
END;
CREATE TRIGGER trials_count_delete AFTER DELETE ON trials BEGIN
    UPDATE state_counts SET n = n - 1 WHERE kind = 'trial' AND state = OLD.state;
END;
CREATE TRIGGER trials_state_change AFTER UPDATE OF state ON trials
WHEN OLD.state IS NOT NEW.state BEGIN
    UPDATE state_counts SET n = n - 1 WHERE kind = 'trial' AND state = OLD.state;
    UPDATE state_counts SET n = n + 1 WHERE kind = 'trial' AND state = NEW.state;
END;
