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

-- No writer may change a state between the counts below and the triggers.
LOCK TABLE jobs, trials IN SHARE ROW EXCLUSIVE MODE;

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

-- How many jobs / trials are in each state, now: the sum over shards. Each database
-- session writes its own shard (its backend pid modulo 64), so concurrent claims do
-- not queue on one counter row; the count of a state is SUM(n) over its shards.
CREATE TABLE state_counts (
    kind    TEXT    NOT NULL,          -- 'job' or 'trial'
    state   TEXT    NOT NULL,
    shard   INTEGER NOT NULL,
    n       BIGINT  NOT NULL,
    PRIMARY KEY (kind, state, shard)
);
INSERT INTO state_counts (kind, state, shard, n)
SELECT 'job', state, 0, COUNT(*) FROM jobs GROUP BY state;
INSERT INTO state_counts (kind, state, shard, n)
SELECT 'trial', state, 0, COUNT(*) FROM trials GROUP BY state;

-- TG_ARGV[0]: 'job' or 'trial'. Row-level, so a statement that changes no state
-- (a renewal, an empty claim) never calls it (see the WHEN clauses).
CREATE FUNCTION judge_state_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    my_shard INTEGER := pg_backend_pid() % 64;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO state_counts AS c (kind, state, shard, n)
        VALUES (TG_ARGV[0], NEW.state, my_shard, 1)
        ON CONFLICT (kind, state, shard) DO UPDATE SET n = c.n + 1;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO state_counts AS c (kind, state, shard, n)
        VALUES (TG_ARGV[0], OLD.state, my_shard, -1)
        ON CONFLICT (kind, state, shard) DO UPDATE SET n = c.n - 1;
    ELSE
        -- Both counter rows in one statement, in state order: two sessions on one
        -- shard always lock them in the same order.
        INSERT INTO state_counts AS c (kind, state, shard, n)
        SELECT TG_ARGV[0], v.state, my_shard, v.d
          FROM (VALUES (OLD.state, -1), (NEW.state, 1)) AS v (state, d)
         ORDER BY v.state
        ON CONFLICT (kind, state, shard) DO UPDATE SET n = c.n + excluded.n;
        -- The attempt ended: the one waiting behind it becomes claimable. The
        -- waiter's id is larger than this row's, and a rejudge locks a submission's
        -- live attempts in id order, so this never deadlocks with one.
        IF TG_ARGV[0] = 'job' AND OLD.state IN ('Queued', 'Running')
           AND NEW.state NOT IN ('Queued', 'Running') THEN
            UPDATE jobs SET blocked = 0 WHERE waits_for = NEW.id AND blocked = 1;
        END IF;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_count_insert AFTER INSERT ON jobs
    FOR EACH ROW EXECUTE FUNCTION judge_state_change('job');
CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs
    FOR EACH ROW EXECUTE FUNCTION judge_state_change('job');
CREATE TRIGGER jobs_state_change AFTER UPDATE OF state ON jobs
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION judge_state_change('job');

CREATE TRIGGER trials_count_insert AFTER INSERT ON trials
    FOR EACH ROW EXECUTE FUNCTION judge_state_change('trial');
CREATE TRIGGER trials_count_delete AFTER DELETE ON trials
    FOR EACH ROW EXECUTE FUNCTION judge_state_change('trial');
CREATE TRIGGER trials_state_change AFTER UPDATE OF state ON trials
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION judge_state_change('trial');
