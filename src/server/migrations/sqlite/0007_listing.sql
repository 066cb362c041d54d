-- Listing routes and the queue summary (CONTRACT §7, issue 26). Never edit once
-- applied: add a new file.
--
-- 1. What the Server remembers of a Runner's calls: when it was last heard from,
--    the languages its latest claim offered and the version it named (its
--    User-Agent). Written at most once every few seconds per Runner and Server
--    (src/server/activity.rs), never in the claim statement.
-- 2. `claimed_ms`: when a job was last claimed, set by the claim statement itself
--    (no extra statement); `GET /api/queue` counts the claims of the last hour.
-- 3. Indexes for the keyset pages, newest first (`id < cursor ORDER BY id DESC`)
--    under each filter, and for the per-minute counts.
ALTER TABLE runners ADD COLUMN last_seen_ms INTEGER;
ALTER TABLE runners ADD COLUMN last_languages TEXT;   -- JSON array of the latest claim's languages
ALTER TABLE runners ADD COLUMN runner_version TEXT;

ALTER TABLE jobs ADD COLUMN claimed_ms INTEGER;

CREATE INDEX jobs_by_state ON jobs (state, id);
CREATE INDEX jobs_by_language ON jobs (language, id);
CREATE INDEX jobs_by_runner ON jobs (runner_id, id) WHERE runner_id IS NOT NULL;
CREATE INDEX jobs_claimed ON jobs (claimed_ms) WHERE claimed_ms IS NOT NULL;
CREATE INDEX results_by_verdict ON results (verdict, evaluation_job_id);
CREATE INDEX results_by_time ON results (created_ms);
CREATE INDEX submissions_by_language ON submissions (language, id);
CREATE INDEX submissions_by_problem ON submissions (problem_id, id);
-- `?since=` / `?until=` windows deep in the history: a range of these, not a walk
-- of every newer row.
CREATE INDEX jobs_by_created ON jobs (created_ms);
CREATE INDEX submissions_by_created ON submissions (created_ms);
