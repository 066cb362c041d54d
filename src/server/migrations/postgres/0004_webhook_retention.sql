-- Settled webhook events (delivered or given up) are deleted once they are older
-- than the Server's retention (`--webhook-retention`, 7 days by default): the
-- outbox is a queue, not an archive, and would otherwise grow by one row per
-- ended attempt with a callback_url forever. This index finds the oldest settled
-- rows without reading the pending ones. Never edit once applied: add a new file.
CREATE INDEX webhook_outbox_settled ON webhook_outbox (COALESCE(delivered_ms, gave_up_ms))
    WHERE delivered_ms IS NOT NULL OR gave_up_ms IS NOT NULL;
