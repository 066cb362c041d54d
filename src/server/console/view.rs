//! How values look on a page: times (relative, with the absolute one beside),
//! sizes, states (a symbol and a word, never colour alone), and the geometry of
//! the SVG charts (computed here, drawn by the templates; no script needed).

use chrono::{DateTime, Utc};

use crate::protocol::JobState;
use crate::server::clock::{Millis, to_datetime};

/// A moment: "3 min ago" and its RFC 3339 form (shown as a tooltip and in a
/// `<time datetime>`).
#[derive(Debug, Clone)]
pub struct When {
    pub relative: String,
    pub absolute: String,
}

impl When {
    pub fn at(ms: Millis, now: Millis) -> When {
        When {
            relative: relative(ms, now),
            absolute: absolute(ms),
        }
    }

    pub fn of(t: &DateTime<Utc>, now: Millis) -> When {
        When::at(t.timestamp_millis(), now)
    }
}

pub fn absolute(ms: Millis) -> String {
    to_datetime(ms).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// "just now", "42 s ago", "in 3 min", "5 h ago", "2 d ago".
pub fn relative(ms: Millis, now: Millis) -> String {
    let delta = (now - ms) / 1000;
    let span = duration(delta.abs());
    if delta.abs() < 2 {
        "just now".to_string()
    } else if delta > 0 {
        format!("{span} ago")
    } else {
        format!("in {span}")
    }
}

/// A duration in seconds, coarsely: "42 s", "3 min", "5 h", "2 d".
pub fn duration(seconds: i64) -> String {
    match seconds {
        s if s < 120 => format!("{s} s"),
        s if s < 2 * 3600 => format!("{} min", s / 60),
        s if s < 2 * 86_400 => format!("{} h", s / 3600),
        s => format!("{} d", s / 86_400),
    }
}

/// Bytes in the unit that reads best: "512 B", "3.2 KiB", "64.0 MiB".
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// A score without a pointless fraction: "100", "37.5".
pub fn score(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

/// A state as the pages show it: a symbol that differs in shape, the word, and
/// a CSS class for colour (which is only ever a third cue).
#[derive(Debug, Clone)]
pub struct Badge {
    pub symbol: &'static str,
    pub text: String,
    pub class: &'static str,
}

pub fn state_badge(state: &str) -> Badge {
    let (symbol, class) = match state.parse::<JobState>() {
        Ok(JobState::Queued) => ("\u{25CB}", "queued"),   // ○
        Ok(JobState::Running) => ("\u{25B6}", "running"), // ▶
        Ok(JobState::Completed) => ("\u{2714}", "ok"),    // ✔
        Ok(JobState::Failed) => ("\u{2716}", "bad"),      // ✖
        Ok(JobState::Cancelled) => ("\u{2298}", "muted"), // ⊘
        Ok(JobState::Superseded) => ("\u{21B7}", "muted"), // ↷
        Err(_) => ("?", "muted"),
    };
    Badge {
        symbol,
        text: state.to_string(),
        class,
    }
}

/// A verdict: Accepted gets a tick, anything else a cross; the text is always
/// there (verdicts are opaque strings, shown escaped).
pub fn verdict_badge(verdict: &str) -> Badge {
    let accepted = verdict == "Accepted" || verdict == "AC";
    Badge {
        symbol: if accepted { "\u{2714}" } else { "\u{2716}" },
        text: verdict.to_string(),
        class: if accepted { "ok" } else { "bad" },
    }
}

/// A Runner's standing.
pub fn runner_badge(status: &str) -> Badge {
    let (symbol, class) = match status {
        "online" => ("\u{25CF}", "ok"),   // ●
        "stale" => ("\u{25D0}", "warn"),  // ◐
        "revoked" => ("\u{2716}", "bad"), // ✖
        _ => ("\u{25CB}", "muted"),       // ○ never seen
    };
    Badge {
        symbol,
        text: status.to_string(),
        class,
    }
}

/// One bar of a chart, in SVG user units.
#[derive(Debug, Clone)]
pub struct Bar {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
    /// The tooltip (`<title>`).
    pub label: String,
    /// Over the limit: drawn with a hatch as well as a colour.
    pub over: bool,
    /// The axis label under the bar (empty when there are too many bars).
    pub tick: String,
    /// The x of the bar's centre.
    pub mid: f64,
}

/// A bar chart: bars, a horizontal reference line (a limit) and axis labels.
#[derive(Debug, Clone)]
pub struct Chart {
    pub width: f64,
    pub height: f64,
    pub bars: Vec<Bar>,
    /// The y of the limit line, when there is one within the chart.
    pub limit_y: Option<f64>,
    pub limit_label: String,
    pub max_label: String,
    pub caption: String,
}

/// Vertical bars for `values`, scaled to the largest of them and `limit`.
pub fn bar_chart(
    values: &[(String, f64)],
    limit: Option<f64>,
    unit: impl Fn(f64) -> String,
    caption: String,
) -> Chart {
    const HEIGHT: f64 = 160.0;
    const TOP: f64 = 12.0;
    let width = 1200.0_f64;
    let ticks = values.len() <= 30;
    let top_value = values
        .iter()
        .map(|(_, v)| *v)
        .chain(limit)
        .fold(0.0_f64, f64::max);
    let scale = if top_value > 0.0 {
        (HEIGHT - TOP) / top_value
    } else {
        0.0
    };
    let n = values.len().max(1) as f64;
    let slot = width / n;
    let bar_width = (slot * 0.8).max(1.0);
    let bars = values
        .iter()
        .enumerate()
        .map(|(i, (name, v))| {
            let h = (v * scale).max(if *v > 0.0 { 1.0 } else { 0.0 });
            let x = i as f64 * slot + (slot - bar_width) / 2.0;
            Bar {
                x,
                mid: x + bar_width / 2.0,
                tick: if ticks {
                    name.rsplit('/')
                        .next()
                        .unwrap_or(name)
                        .chars()
                        .take(12)
                        .collect()
                } else {
                    String::new()
                },
                y: HEIGHT - h,
                width: bar_width,
                height: h,
                label: format!("{name}: {}", unit(*v)),
                over: limit.is_some_and(|l| *v > l),
            }
        })
        .collect();
    Chart {
        width,
        height: HEIGHT,
        bars,
        limit_y: limit.filter(|l| *l > 0.0).map(|l| HEIGHT - l * scale),
        limit_label: limit.map(&unit).unwrap_or_default(),
        max_label: unit(top_value),
        caption,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_sizes_and_bars_read_well() {
        assert_eq!(relative(0, 42_000), "42 s ago");
        assert_eq!(relative(0, 600_000), "10 min ago");
        assert_eq!(relative(10_000, 0), "in 10 s");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(3 << 20), "3.0 MiB");
        assert_eq!(score(100.0), "100");
        let chart = bar_chart(
            &[("a".into(), 1.0), ("b".into(), 3.0)],
            Some(2.0),
            |v| format!("{v}"),
            String::new(),
        );
        assert!(!chart.bars[0].over && chart.bars[1].over);
        assert!(chart.bars[1].height > chart.bars[0].height);
        assert!(chart.limit_y.is_some_and(|y| y > 0.0 && y < chart.height));
    }
}
