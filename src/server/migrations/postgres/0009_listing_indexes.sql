-- Listing at depth, second pass (BENCHMARKS.md "Listing"). Never edit once
-- applied: add a new file.
--
-- `?state=&language=` pages (newest first under both filters) and the queue
-- summary's Queued jobs per language: one range of this index each, where
-- `jobs_by_state` walked every job of the state and read its row for the
-- language. Kept up by the statements that already change a job's state (the
-- claim's one UPDATE among them); no statement is added.
CREATE INDEX jobs_by_state_language ON jobs (state, language, id);

-- `GET /api/submissions?state=`: that state's jobs by submission,
-- newest first, each kept when it is its submission's latest attempt (a walk of
-- every submission otherwise, ~100 per item for a state of 1 % of the jobs).
CREATE INDEX jobs_by_state_submission ON jobs (state, submission_id);
