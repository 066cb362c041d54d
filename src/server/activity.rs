//! What the Server remembers of each Runner's calls for `GET /api/runners`: when
//! it was last heard from, and the languages and version its latest claim named.
//!
//! Kept off the hot path: this process writes a Runner's row at most once every
//! [`NOTE_EVERY_MS`] (one `UPDATE` by primary key), or at once when a claim names
//! other languages or another version than the last one written. Between writes
//! the Runner's calls cost one lookup in this in-memory map. So "last heard from"
//! is true to within a few seconds, on each Server sharing the database.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::server::clock::Millis;
use crate::server::db::Db;

/// The most often one Server writes one Runner's activity.
pub const NOTE_EVERY_MS: Millis = 5_000;
/// Longest `User-Agent` kept as a Runner's version.
pub const MAX_VERSION_LEN: usize = 128;

/// What a claim told the Server: its languages and version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimNote {
    pub languages: Vec<String>,
    pub version: Option<String>,
}

#[derive(Debug, Clone)]
struct Written {
    at_ms: Millis,
    claim: Option<ClaimNote>,
}

/// The last activity this Server wrote per Runner.
#[derive(Debug, Default)]
pub struct RunnerActivity {
    written: Mutex<HashMap<i64, Written>>,
}

impl RunnerActivity {
    /// Should a call of `runner_id` at `now` (a claim when `claim` is set) be
    /// written? Records it as written when so.
    pub fn due(&self, runner_id: i64, now: Millis, claim: Option<&ClaimNote>) -> bool {
        let Ok(mut written) = self.written.lock() else {
            return true;
        };
        let due = match written.get(&runner_id) {
            None => true,
            Some(w) => {
                now.saturating_sub(w.at_ms) >= NOTE_EVERY_MS
                    || claim.is_some_and(|c| w.claim.as_ref() != Some(c))
            }
        };
        if due {
            let claim = claim
                .cloned()
                .or_else(|| written.get(&runner_id).and_then(|w| w.claim.clone()));
            written.insert(runner_id, Written { at_ms: now, claim });
        }
        due
    }
}

/// The version a claim names: its `User-Agent`, printable ASCII, truncated.
pub fn version_of(user_agent: Option<&str>) -> Option<String> {
    let ua = user_agent?.trim();
    if ua.is_empty() {
        return None;
    }
    Some(
        ua.chars()
            .filter(|c| c.is_ascii_graphic() || *c == ' ')
            .take(MAX_VERSION_LEN)
            .collect(),
    )
}

/// Notes a call of `runner_id` at `now` (a claim with what it offered when
/// `claim` is set), writing it to `db` when due. A failed write is logged, never
/// the caller's error.
pub async fn note(
    db: &Db,
    activity: &RunnerActivity,
    runner_id: i64,
    now: Millis,
    claim: Option<ClaimNote>,
) {
    if !activity.due(runner_id, now, claim.as_ref()) {
        return;
    }
    let claim_ref = claim
        .as_ref()
        .map(|c| (c.languages.as_slice(), c.version.as_deref()));
    if let Err(e) = db.note_runner_activity(runner_id, now, claim_ref).await {
        tracing::warn!(runner_id, error = %e, "could not record the runner's activity");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_at_most_every_few_seconds_unless_a_claim_changes() {
        let a = RunnerActivity::default();
        let claim = ClaimNote {
            languages: vec!["c".into()],
            version: Some("judge-runner/1".into()),
        };
        assert!(a.due(1, 0, Some(&claim)));
        assert!(!a.due(1, 1_000, Some(&claim)));
        assert!(!a.due(1, 1_000, None));
        assert!(a.due(2, 1_000, None));
        let other = ClaimNote {
            languages: vec!["c".into(), "cpp".into()],
            version: claim.version.clone(),
        };
        assert!(a.due(1, 2_000, Some(&other)));
        assert!(!a.due(1, 3_000, Some(&other)));
        assert!(a.due(1, 2_000 + NOTE_EVERY_MS, None));
    }

    #[test]
    fn versions_are_printable_and_bounded() {
        assert_eq!(version_of(None), None);
        assert_eq!(version_of(Some("  ")), None);
        assert_eq!(version_of(Some("a\u{7}b")).as_deref(), Some("ab"));
        assert_eq!(
            version_of(Some(&"x".repeat(500))).unwrap().len(),
            MAX_VERSION_LEN
        );
    }
}
