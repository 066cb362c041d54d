-- `Idempotency-Key` (CONTRACT §7): the first answer to a keyed request, so the
-- same key with the same request answers the same ids again and another request
-- under that key is refused (409 request.conflict). One row per (route, key),
-- written in the same transaction as what the request created; the primary key is
-- what makes two concurrent twins end with one creation (the second one's insert
-- finds the first one's row and its transaction is rolled back). Kept: a key
-- answers for as long as its row lives (the contract asks for 24 h at least).
-- Never edit once applied: add a new file.
CREATE TABLE idempotency_keys (
    route           TEXT    NOT NULL,   -- 'submissions' | 'problems'
    client_key      TEXT    NOT NULL,   -- the header, as the client sent it
    request_sha256  TEXT    NOT NULL,   -- digest of the request it first came with
    first_id        BIGINT  NOT NULL,   -- submission_id | problem_id
    second_id       BIGINT  NOT NULL,   -- the first attempt's job_id | problem_version_id
    created_ms      BIGINT  NOT NULL,
    PRIMARY KEY (route, client_key)
);
