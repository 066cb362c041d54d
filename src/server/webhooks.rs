//! Result webhooks (CONTRACT §4, 2026-12): `callback_url` checks at submission
//! time, and the sender task every `serve` runs.
//!
//! The `attempt.ended` event is written to `webhook_outbox` by a trigger inside
//! the statement that ends the attempt (migration 0003), so it exists exactly
//! when the state change committed. The sender claims due rows (PostgreSQL:
//! `FOR UPDATE SKIP LOCKED`, then held for `timeout + HOLD_MARGIN`, so two
//! Servers never send one event at the same time), fixes the body and delivery
//! id on the first try, POSTs it signed, and settles the row: delivered on any
//! 2xx, else retried with exponential backoff and jitter until 24 h after the
//! event, then given up. A Server killed mid-delivery leaves the row claimed
//! until its hold ends; any Server then sends it again (at least once).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use hmac::{Hmac, KeyInit as _, Mac as _};
use rand::Rng as _;
use sha2::Sha256;
use tokio_util::sync::CancellationToken;

use crate::protocol::AttemptEnded;
use crate::server::auth::new_lease_token;
use crate::server::db::DbError;
use crate::server::db::webhooks::OutboxRow;
use crate::server::error::ApiError;
use crate::server::state::AppState;

/// Longest `callback_url` accepted.
pub const MAX_URL_LEN: usize = 2048;
/// Events one sender takes per look.
const BATCH: i64 = 32;
/// A claimed row is held this much longer than one delivery may take.
const HOLD_MARGIN: Duration = Duration::from_secs(5);
/// Settled events one pruning statement deletes at most (SQLite's one writer is
/// held for one such statement at a time).
const PRUNE_BATCH: i64 = 1000;
/// Statements per pruning round at most; the rest waits for the next round.
const PRUNE_ROUNDS: usize = 20;
/// `event` of the only event there is.
pub const ATTEMPT_ENDED: &str = "attempt.ended";

/// `sha256=<hex HMAC-SHA256 of body keyed by secret>`: the `X-Judge-Signature`.
pub fn signature(secret: &str, body: &[u8]) -> String {
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret.as_bytes()) {
        Ok(mac) => mac,
        // HMAC takes keys of any length; this arm is unreachable.
        Err(_) => return String::new(),
    };
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// Loopback, private, link-local, shared, unspecified, broadcast, multicast or
/// documentation addresses: not the public Internet.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_private_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_private_v4(v4);
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00 // unique local fc00::/7
                || (first & 0xffc0) == 0xfe80 // link-local fe80::/10
                || v6 == Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0)
        }
    }
}

fn is_private_v4(v4: Ipv4Addr) -> bool {
    let [a, b, ..] = v4.octets();
    v4.is_loopback()
        || v4.is_private()
        || v4.is_link_local()
        || v4.is_unspecified()
        || v4.is_broadcast()
        || v4.is_multicast()
        || v4.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared 100.64.0.0/10
}

fn host_of(authority: &str) -> String {
    let host = authority.rsplit_once(':').map_or(authority, |(h, port)| {
        if port.chars().all(|c| c.is_ascii_digit()) && !h.ends_with(':') {
            h
        } else {
            authority
        }
    });
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

/// Checks a `callback_url` given on `POST /api/submissions`: a secret to sign
/// with; `http`/`https`; and, unless `--webhook-allow-private`, not this
/// Server's own host (`request_host`, `--listen`, `--public-url`) nor a name or
/// address that is (or resolves to) a loopback or private address.
pub async fn check_callback_url(
    state: &AppState,
    url: &str,
    request_host: Option<&str>,
) -> Result<(), ApiError> {
    let config = &state.config.webhooks;
    if config.secret.is_none() {
        return Err(ApiError::CallbackNoSecret);
    }
    let invalid = |why: &str| ApiError::CallbackInvalid(format!("callback_url {why}"));
    if url.len() > MAX_URL_LEN {
        return Err(invalid(&format!("is longer than {MAX_URL_LEN} bytes")));
    }
    let parsed = reqwest::Url::parse(url).map_err(|e| invalid(&format!("is not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(invalid("must be http:// or https://"));
    }
    let Some(host) = parsed.host_str() else {
        return Err(invalid("has no host"));
    };
    if config.allow_private {
        return Ok(());
    }
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    let mut own: Vec<String> = vec![host_of(&state.config.listen)];
    if let Some(h) = request_host {
        own.push(host_of(h));
    }
    if let Some(public) = state
        .config
        .public_url
        .as_deref()
        .and_then(|u| reqwest::Url::parse(u).ok())
        && let Some(h) = public.host_str()
    {
        own.push(host_of(h));
    }
    if own.contains(&host) || host == "localhost" || host.ends_with(".localhost") {
        return Err(invalid(
            "names this Server or localhost (allowed only with --webhook-allow-private)",
        ));
    }
    if resolves_to_private(&host, parsed.port_or_known_default().unwrap_or(80)).await? {
        return Err(invalid(
            "is a loopback or private address (allowed only with --webhook-allow-private)",
        ));
    }
    Ok(())
}

/// Does `host` (an address, or a name resolved now) reach any private address?
/// A name that does not resolve is refused too.
async fn resolves_to_private(host: &str, port: u16) -> Result<bool, ApiError> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(is_private(ip));
    }
    let addrs = tokio::net::lookup_host((host, port)).await.map_err(|_| {
        ApiError::CallbackInvalid(format!("callback_url host {host:?} does not resolve"))
    })?;
    let mut any = false;
    for addr in addrs {
        any = true;
        if is_private(addr.ip()) {
            return Ok(true);
        }
    }
    if any {
        Ok(false)
    } else {
        Err(ApiError::CallbackInvalid(format!(
            "callback_url host {host:?} does not resolve"
        )))
    }
}

fn wall_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The delay before try `tries + 1`: `backoff * 2^(tries-1)` capped, then a
/// random point in its upper half (so Servers that failed together spread out).
pub fn retry_delay(state: &AppState, tries: i64) -> Duration {
    let config = &state.config.webhooks;
    let exp = u32::try_from(tries.saturating_sub(1).clamp(0, 30)).unwrap_or(30);
    let full = config
        .backoff
        .saturating_mul(2_u32.saturating_pow(exp))
        .min(config.max_backoff);
    let half = full / 2;
    let jitter_ms = rand::rng().random_range(0..=millis(half).max(0));
    half + Duration::from_millis(u64::try_from(jitter_ms).unwrap_or(0))
}

/// The sender: every `poll`, delivers what is due, until `stop`.
pub async fn run(state: AppState, stop: CancellationToken) {
    let client = match reqwest::Client::builder()
        .timeout(state.config.webhooks.timeout)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("judge-runner/", env!("CARGO_PKG_VERSION")))
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "webhooks: cannot build the HTTP client; no deliveries");
            return;
        }
    };
    let mut pruned_at: Option<tokio::time::Instant> = None;
    loop {
        let poll = state.config.webhooks.poll;
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(poll) => {}
        }
        tokio::select! {
            () = stop.cancelled() => return,
            sent = send_due(&state, &client) => {
                if let Err(e) = sent {
                    tracing::warn!(error = %e, "webhooks: a sweep of the outbox failed");
                }
            }
        }
        if pruned_at.is_none_or(|at| at.elapsed() >= state.config.webhooks.prune_every) {
            pruned_at = Some(tokio::time::Instant::now());
            tokio::select! {
                () = stop.cancelled() => return,
                pruned = prune(&state) => {
                    if let Err(e) = pruned {
                        tracing::warn!(error = %e, "webhooks: pruning the outbox failed");
                    }
                }
            }
        }
    }
}

/// Deletes the settled events older than the retention, in bounded statements;
/// answers how many. Every Server does it; on PostgreSQL two never wait for
/// each other's rows (`SKIP LOCKED`).
pub async fn prune(state: &AppState) -> Result<u64, DbError> {
    let before = wall_ms().saturating_sub(millis(state.config.webhooks.retention));
    let mut deleted = 0;
    for _ in 0..PRUNE_ROUNDS {
        let n = state.db.prune_webhooks(before, PRUNE_BATCH).await?;
        deleted += n;
        if n < PRUNE_BATCH.unsigned_abs() {
            break;
        }
    }
    if deleted > 0 {
        tracing::info!(
            deleted,
            "webhooks: deleted settled events past the retention"
        );
    }
    Ok(deleted)
}

/// Claims the due events and delivers them concurrently; answers how many were claimed.
pub async fn send_due(state: &AppState, client: &reqwest::Client) -> Result<usize, DbError> {
    let now = wall_ms();
    let hold = millis(state.config.webhooks.timeout + HOLD_MARGIN);
    let rows = state
        .db
        .claim_webhooks(now, now.saturating_add(hold), BATCH)
        .await?;
    let n = rows.len();
    let sends = rows.into_iter().map(|row| deliver(state, client, row));
    for outcome in futures_util::future::join_all(sends).await {
        outcome?;
    }
    Ok(n)
}

/// The event's body, from the ended attempt (final, so the same whenever built).
async fn payload(state: &AppState, job_id: i64) -> Result<String, DbError> {
    let job = state.db.job_view(job_id).await?.ok_or(DbError::NotFound {
        what: "job",
        id: job_id,
    })?;
    let event = AttemptEnded {
        event: ATTEMPT_ENDED.to_string(),
        submission_id: job.submission_id,
        job_id: job.id,
        attempt: job.attempt,
        state: job.state,
        failure_reason: job.failure_reason,
        result: job.result,
    };
    serde_json::to_string(&event).map_err(|e| DbError::Corrupt {
        detail: format!("event of job {job_id} does not serialise: {e}"),
    })
}

async fn deliver(
    state: &AppState,
    client: &reqwest::Client,
    row: OutboxRow,
) -> Result<(), DbError> {
    let (delivery_id, body) = match (&row.delivery_id, &row.payload) {
        (Some(d), Some(p)) => (d.clone(), p.clone()),
        _ => {
            let body = payload(state, row.job_id).await?;
            let id = format!("whd_{}", new_lease_token());
            state.db.fill_webhook(row.id, &id, &body).await?
        }
    };
    let counters = &state.metrics.webhooks;
    let Some(secret) = state.config.webhooks.secret.as_deref() else {
        // A Server without a secret cannot sign: leave the event to one that can.
        state
            .db
            .webhook_retry(
                row.id,
                wall_ms() + millis(retry_delay(state, row.tries)),
                "no secret on this Server",
            )
            .await?;
        return Ok(());
    };
    let error = match post(
        state,
        client,
        &row.callback_url,
        &delivery_id,
        secret,
        &body,
    )
    .await
    {
        Ok(()) => {
            state.db.webhook_delivered(row.id, wall_ms()).await?;
            counters.delivered.inc();
            tracing::info!(job_id = row.job_id, delivery = %delivery_id, tries = row.tries, "webhook delivered");
            return Ok(());
        }
        Err(e) => e,
    };
    let now = wall_ms();
    let next = now.saturating_add(millis(retry_delay(state, row.tries)));
    let deadline = row
        .created_ms
        .saturating_add(millis(state.config.webhooks.give_up_after));
    if next > deadline {
        state.db.webhook_gave_up(row.id, now, &error).await?;
        counters.gave_up.inc();
        tracing::warn!(job_id = row.job_id, delivery = %delivery_id, tries = row.tries, %error, "webhook given up");
    } else {
        state.db.webhook_retry(row.id, next, &error).await?;
        counters.failed.inc();
        tracing::info!(job_id = row.job_id, delivery = %delivery_id, tries = row.tries, %error, "webhook failed; will retry");
    }
    Ok(())
}

/// One POST; `Err` says why it did not count as delivered.
async fn post(
    state: &AppState,
    client: &reqwest::Client,
    url: &str,
    delivery_id: &str,
    secret: &str,
    body: &str,
) -> Result<(), String> {
    if !state.config.webhooks.allow_private {
        // Checked again at send time: a name may resolve elsewhere by now.
        let parsed = reqwest::Url::parse(url).map_err(|e| format!("bad URL: {e}"))?;
        let host = parsed
            .host_str()
            .unwrap_or_default()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = parsed.port_or_known_default().unwrap_or(80);
        match resolves_to_private(&host, port).await {
            Ok(false) => {}
            Ok(true) => return Err("the host now resolves to a private address".to_string()),
            Err(e) => return Err(e.to_string()),
        }
    }
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .header("x-judge-signature", signature(secret, body.as_bytes()))
        .header("x-judge-delivery", delivery_id)
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| format!("request failed: {e}"))?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("answered {status}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_is_hmac_sha256_hex() {
        // RFC 4231 test case 2.
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn private_addresses() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_private(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["8.8.8.8", "1.1.1.1", "2606:4700::1111"] {
            assert!(!is_private(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn host_of_authorities() {
        assert_eq!(host_of("127.0.0.1:8080"), "127.0.0.1");
        assert_eq!(host_of("Judge.Example"), "judge.example");
        assert_eq!(host_of("[::1]:80"), "::1");
    }
}
