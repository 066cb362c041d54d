-- judge-runner Server schema, SQLite. Never edit once applied: add a new file.
-- Times are integer milliseconds since the Unix epoch (UTC): the same type and the
-- same ordering on both backends, compared with plain integer operators.

CREATE TABLE runners (
    id          INTEGER PRIMARY KEY,
    name        TEXT    NOT NULL,
    key_hash    TEXT    NOT NULL UNIQUE,   -- SHA-256 hex of the key; the key is shown once
    created_ms  INTEGER NOT NULL,
    revoked_ms  INTEGER
);

CREATE TABLE api_tokens (
    id          INTEGER PRIMARY KEY,
    token_hash  TEXT    NOT NULL UNIQUE,
    scopes      TEXT    NOT NULL,          -- space-separated, e.g. 'trial:run'
    created_ms  INTEGER NOT NULL
);

CREATE TABLE problems (
    id          INTEGER PRIMARY KEY,
    created_ms  INTEGER NOT NULL
);

CREATE TABLE problem_versions (
    id          INTEGER PRIMARY KEY,
    problem_id  INTEGER NOT NULL REFERENCES problems (id),
    sha256      TEXT    NOT NULL,
    size        INTEGER NOT NULL,
    time_limit  REAL,
    created_ms  INTEGER NOT NULL
);
CREATE INDEX problem_versions_by_problem ON problem_versions (problem_id, id);

CREATE TABLE submissions (
    id          INTEGER PRIMARY KEY,
    problem_id  INTEGER NOT NULL REFERENCES problems (id),
    language    TEXT    NOT NULL,
    files       TEXT    NOT NULL,          -- the wire JSON array, handed back as given
    created_ms  INTEGER NOT NULL
);

CREATE TABLE jobs (
    id                  INTEGER PRIMARY KEY,
    submission_id       INTEGER NOT NULL REFERENCES submissions (id),
    attempt             INTEGER NOT NULL,
    problem_version_id  INTEGER NOT NULL REFERENCES problem_versions (id),
    language            TEXT    NOT NULL,  -- the submission's, copied: the claim filters on it
    -- The sibling attempt that was Running when this one was created (a rejudge),
    -- if any. Filter (4) of the claim is "that attempt is neither Queued nor
    -- Running": one primary-key lookup instead of a search of the submission's
    -- attempts. Queued siblings are superseded by the rejudge, so no other older
    -- attempt can be live, and no newer one can run before this one ends.
    waits_for           INTEGER REFERENCES jobs (id),
    runner_id           INTEGER REFERENCES runners (id),
    state               TEXT    NOT NULL,
    lease_token         TEXT,
    lease_seconds       INTEGER,
    lease_expires_ms    INTEGER,
    deliveries          INTEGER NOT NULL DEFAULT 0,
    acknowledged_ms     INTEGER,
    refunds             INTEGER NOT NULL DEFAULT 0,
    releases            INTEGER NOT NULL DEFAULT 0,
    failure_reason      TEXT,
    row_version         INTEGER NOT NULL DEFAULT 0,
    progress_done       INTEGER,
    progress_total      INTEGER,
    created_ms          INTEGER NOT NULL,
    UNIQUE (submission_id, attempt)
);
-- Only what the hot paths need. Claims walk the Queued rows oldest first; the
-- reaper and revocation walk the Running rows (at most one per Runner slot) and
-- filter them, so no index holds lease_expires_ms and a renewal changes no indexed
-- column. A submission's attempts are found through UNIQUE (submission_id, attempt).
CREATE INDEX jobs_queued ON jobs (id) WHERE state = 'Queued';
CREATE INDEX jobs_running ON jobs (id) WHERE state = 'Running';

CREATE TABLE results (
    evaluation_job_id   INTEGER PRIMARY KEY REFERENCES jobs (id),
    problem_version_id  INTEGER NOT NULL REFERENCES problem_versions (id),
    score               REAL    NOT NULL,
    max_score           REAL    NOT NULL,
    verdict             TEXT    NOT NULL,
    extra               TEXT,              -- JSON text, at most 2048 bytes; NULL = none
    props               TEXT,              -- JSON text; NULL = none
    runner_version      TEXT,
    created_ms          INTEGER NOT NULL
);

CREATE TABLE job_files (
    job_id      INTEGER NOT NULL REFERENCES jobs (id),
    name        TEXT    NOT NULL,
    size        INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL,
    PRIMARY KEY (job_id, name)
);

-- Trials are their own table on purpose: no query over submissions, jobs, results or
-- counts can include one by forgetting a filter.
CREATE TABLE trials (
    id                  INTEGER PRIMARY KEY,
    token_id            INTEGER REFERENCES api_tokens (id),   -- NULL: the manager asked
    language            TEXT    NOT NULL,
    files               TEXT    NOT NULL,
    package_sha256      TEXT    NOT NULL,
    package_size        INTEGER NOT NULL,
    package_file        TEXT    NOT NULL,  -- name under <storage>/trials/, deleted when the trial ends
    time_limit          REAL,
    runner_id           INTEGER REFERENCES runners (id),
    state               TEXT    NOT NULL,
    lease_token         TEXT,
    lease_seconds       INTEGER,
    lease_expires_ms    INTEGER,
    deliveries          INTEGER NOT NULL DEFAULT 0,
    acknowledged_ms     INTEGER,
    refunds             INTEGER NOT NULL DEFAULT 0,
    releases            INTEGER NOT NULL DEFAULT 0,
    failure_reason      TEXT,
    row_version         INTEGER NOT NULL DEFAULT 0,
    progress_done       INTEGER,
    progress_total      INTEGER,
    timings             TEXT,              -- JSON array once Completed
    created_ms          INTEGER NOT NULL
);
CREATE INDEX trials_queued ON trials (id) WHERE state = 'Queued';
CREATE INDEX trials_running ON trials (id) WHERE state = 'Running';
CREATE INDEX trials_live_by_sha ON trials (package_sha256) WHERE state IN ('Queued', 'Running');
