//! The text `verify` and the demo print: one line per submission as it
//! finishes, and the final table with its total line.

use std::fmt::Write as _;
use std::time::Duration;

use super::{Expected, Row};

/// What the first column says of a row.
pub fn mark(row: &Row) -> &'static str {
    if row.skipped.is_some() {
        "skip"
    } else if row.error.is_some() {
        "ERR"
    } else if !row.ok {
        "BAD"
    } else if row.expected == Expected::Unknown {
        "--"
    } else {
        "ok"
    }
}

/// `50 of 100`; `-` without a verdict.
pub fn score(row: &Row) -> String {
    match (row.score, row.max_score, row.verdict) {
        (Some(s), Some(m), Some(_)) => format!("{} of {}", number(s), number(m)),
        _ => "-".to_string(),
    }
}

fn number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

/// The verdict column: the verdict, why it was skipped, or the failure.
pub fn outcome(row: &Row) -> String {
    if let Some(why) = &row.skipped {
        return format!("skipped: {why}");
    }
    if let Some(error) = &row.error {
        return format!("error: {error}");
    }
    row.verdict
        .map_or_else(|| "-".to_string(), |v| v.as_str().to_string())
}

/// The slowest test's CPU time, `0.123 s`; `-` when no test ran.
pub fn cpu(row: &Row) -> String {
    row.max_cpu_seconds
        .map_or_else(|| "-".to_string(), |s| format!("{s:.3} s"))
}

const HEADER: [&str; 7] = [
    "",
    "submission",
    "language",
    "expected",
    "verdict",
    "score",
    "slowest test CPU",
];

fn cells(row: &Row) -> [String; 7] {
    [
        mark(row).to_string(),
        row.label.clone(),
        row.language.clone(),
        row.expected.short(),
        outcome(row),
        score(row),
        cpu(row),
    ]
}

/// The live line of a row, its submission column `width` wide.
pub fn line(row: &Row, width: usize) -> String {
    let c = cells(row);
    let mismatch = if mark(row) == "BAD" {
        "  <-- MISMATCH"
    } else {
        ""
    };
    format!(
        "{:<4} {:<width$}  {:<8}  {:<11}  {:<22}  {:>10}  {:>9}{mismatch}",
        c[0], c[1], c[2], c[3], c[4], c[5], c[6]
    )
}

/// The width of the submission column for these labels.
pub fn label_width<'a>(labels: impl IntoIterator<Item = &'a str>) -> usize {
    labels.into_iter().map(str::len).max().unwrap_or(0).max(10)
}

/// Counts for the total line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Totals {
    pub submissions: usize,
    pub matched: usize,
    pub mismatched: usize,
    pub skipped: usize,
    /// Judged, in a folder naming no verdict.
    pub unchecked: usize,
}

impl Totals {
    pub fn of(rows: &[Row]) -> Totals {
        let mut t = Totals {
            submissions: rows.len(),
            ..Totals::default()
        };
        for row in rows {
            if row.skipped.is_some() {
                t.skipped += 1;
            } else if !row.ok {
                t.mismatched += 1;
            } else if row.expected == Expected::Unknown {
                t.unchecked += 1;
            } else {
                t.matched += 1;
            }
        }
        t
    }
}

/// The final table: a header, one line per row, the total line.
pub fn table(rows: &[Row], wall: Duration) -> String {
    let width = label_width(rows.iter().map(|r| r.label.as_str()));
    let mut out = String::new();
    let h = HEADER;
    let header = format!(
        "{:<4} {:<width$}  {:<8}  {:<11}  {:<22}  {:>10}  {:>9}",
        h[0], h[1], h[2], h[3], h[4], h[5], h[6]
    );
    let _ = writeln!(out, "{header}");
    let _ = writeln!(out, "{}", "-".repeat(header.len()));
    for row in rows {
        let _ = writeln!(out, "{}", line(row, width));
    }
    let _ = writeln!(out, "{}", total_line(&Totals::of(rows), wall));
    out
}

/// `total: 57 submissions, 56 matched, 1 mismatched, 0 skipped, wall 12.3 s`.
pub fn total_line(t: &Totals, wall: Duration) -> String {
    let mut line = format!(
        "total: {} submissions, {} matched, {} mismatched",
        t.submissions, t.matched, t.mismatched
    );
    if t.skipped > 0 {
        let _ = write!(line, ", {} skipped", t.skipped);
    }
    if t.unchecked > 0 {
        let _ = write!(line, ", {} in folders that expect nothing", t.unchecked);
    }
    let _ = write!(line, ", wall {:.1} s", wall.as_secs_f64());
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judge::Verdict;

    fn row(label: &str, folder: &str) -> Row {
        Row {
            label: label.into(),
            folder: folder.into(),
            language: "c".into(),
            expected: Expected::from_folder(folder),
            verdict: Some(Verdict::Accepted),
            score: Some(50.0),
            max_score: Some(100.0),
            max_cpu_seconds: Some(0.25),
            ok: true,
            skipped: None,
            error: None,
        }
    }

    #[test]
    fn the_table_shows_scores_times_and_a_total_line() {
        let mut bad = row("accepted/half.c", "accepted");
        bad.ok = false;
        let mut skipped = row("accepted/x.kt", "accepted");
        skipped.skipped = Some("no configured language for .kt".into());
        skipped.verdict = None;
        let rows = [
            row("partially_accepted/half.c", "partially_accepted"),
            bad,
            skipped,
            row("slow_accepted/s.c", "slow_accepted"),
        ];
        let text = table(&rows, Duration::from_millis(12_340));
        assert!(text.contains("slowest test CPU"), "{text}");
        assert!(text.contains("50 of 100"), "{text}");
        assert!(text.contains("0.250 s"), "{text}");
        assert!(text.contains("<-- MISMATCH"), "{text}");
        assert!(text.contains("skipped: no configured language"), "{text}");
        assert!(
            text.contains(
                "total: 4 submissions, 1 matched, 1 mismatched, 1 skipped, \
                 1 in folders that expect nothing, wall 12.3 s"
            ),
            "{text}"
        );
    }
}
