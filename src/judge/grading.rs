//! problemtools' default grader (`support/default_grader`) over the package's
//! `Grading`: how a group's results become one verdict and one score, and the
//! most a submission can score.

use crate::package::{Grading, ScoreAggregation, TestGroup, TestItem, VerdictAggregation};

use super::verdict::Verdict;

/// A verdict with its score: the result of a test or of a group.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Graded {
    pub verdict: Verdict,
    pub score: f64,
}

impl Graded {
    pub const fn new(verdict: Verdict, score: f64) -> Self {
        Graded { verdict, score }
    }
}

/// Aggregates the results of a group's judged items, in judging order, as the
/// default grader does. `ignore_sample` applies to the root group only: its
/// last result (the secret group) alone counts.
pub fn aggregate(grading: &Grading, results: &[Graded], ignore_sample: bool) -> Graded {
    if results.is_empty() {
        return Graded::new(Verdict::Accepted, 0.0);
    }
    let results = if ignore_sample {
        &results[results.len() - 1..]
    } else {
        results
    };
    let verdict =
        if grading.accept_if_any_accepted && results.iter().any(|r| r.verdict.is_accepted()) {
            Verdict::Accepted
        } else {
            aggregate_verdicts(grading.verdict_aggregation, results)
        };
    let score = aggregate_scores(grading.score_aggregation, results.iter().map(|r| r.score));
    Graded::new(verdict, round_like_grader(score))
}

fn aggregate_verdicts(how: VerdictAggregation, results: &[Graded]) -> Verdict {
    match how {
        VerdictAggregation::AlwaysAccept => Verdict::Accepted,
        VerdictAggregation::FirstError => results
            .iter()
            .map(|r| r.verdict)
            .find(|v| !v.is_accepted())
            .unwrap_or(Verdict::Accepted),
        VerdictAggregation::WorstError => results
            .iter()
            .map(|r| r.verdict)
            .min_by_key(|v| v.severity())
            .unwrap_or(Verdict::Accepted),
    }
}

/// Sum, min, max or average; 0 for no scores.
pub fn aggregate_scores(how: ScoreAggregation, scores: impl Iterator<Item = f64>) -> f64 {
    let scores: Vec<f64> = scores.collect();
    if scores.is_empty() {
        return 0.0;
    }
    match how {
        ScoreAggregation::Sum => scores.iter().sum(),
        ScoreAggregation::Min => scores.iter().copied().fold(f64::INFINITY, f64::min),
        ScoreAggregation::Max => scores.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        ScoreAggregation::Avg => scores.iter().sum::<f64>() / scores.len() as f64,
    }
}

/// The grader prints its score with `%f`, and the next level reads that back:
/// six decimals at every level, as problemtools scores.
fn round_like_grader(score: f64) -> f64 {
    let rounded = (score * 1e6).round() / 1e6;
    if rounded == 0.0 { 0.0 } else { rounded }
}

/// The score of one test: the validator's `score.txt` when it wrote one, else the
/// group's accept/reject score; always 0 in a group that scores nothing (the
/// samples of a 2023-07 package; legacy samples score like any group).
pub fn test_score(group: &TestGroup, verdict: Verdict, custom: Option<f64>) -> f64 {
    if group.grading.zero_score {
        return 0.0;
    }
    match (verdict.is_accepted(), custom) {
        (true, Some(score)) => score,
        (true, None) => group.grading.accept_score,
        (false, _) => group.grading.reject_score,
    }
}

/// The most a submission can score: the root's `range` maximum when finite, else
/// every group's maximum aggregated as its scores would be.
pub fn max_score(root: &TestGroup) -> f64 {
    group_max(root, true)
}

fn group_max(group: &TestGroup, root: bool) -> f64 {
    let (_, range_max) = group.grading.range;
    if range_max.is_finite() {
        return range_max;
    }
    let mut maxima: Vec<f64> = group
        .items
        .iter()
        .map(|item| match item {
            TestItem::Case(_) if group.grading.zero_score => 0.0,
            TestItem::Case(_) => group.grading.accept_score,
            TestItem::Group(sub) => group_max(sub, false),
        })
        .collect();
    if root && group.grading.ignore_sample && maxima.len() > 1 {
        maxima.drain(..maxima.len() - 1);
    }
    round_like_grader(aggregate_scores(
        group.grading.score_aggregation,
        maxima.into_iter(),
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use Verdict::*;

    fn g(v: Verdict, s: f64) -> Graded {
        Graded::new(v, s)
    }

    #[test]
    fn worst_error_orders_like_problemtools() {
        let grading = Grading::default();
        let r = aggregate(
            &grading,
            &[g(WrongAnswer, 0.0), g(TimeLimitExceeded, 0.0)],
            false,
        );
        assert_eq!(r.verdict, TimeLimitExceeded);
        let r = aggregate(
            &grading,
            &[g(OutputLimitExceeded, 0.0), g(RunTimeError, 0.0)],
            false,
        );
        assert_eq!(r.verdict, RunTimeError);
        let r = aggregate(&grading, &[g(Accepted, 1.0), g(Accepted, 1.0)], false);
        assert_eq!(r, g(Accepted, 2.0));
    }

    #[test]
    fn first_error_and_always_accept() {
        let mut grading = Grading {
            verdict_aggregation: VerdictAggregation::FirstError,
            ..Grading::default()
        };
        let rs = [g(Accepted, 1.0), g(WrongAnswer, 0.0), g(RunTimeError, 0.0)];
        assert_eq!(aggregate(&grading, &rs, false).verdict, WrongAnswer);
        grading.verdict_aggregation = VerdictAggregation::AlwaysAccept;
        assert_eq!(aggregate(&grading, &rs, false), g(Accepted, 1.0));
    }

    #[test]
    fn score_aggregations() {
        let rs = [g(Accepted, 50.0), g(Accepted, 20.0), g(WrongAnswer, 0.0)];
        let with = |a| Grading {
            score_aggregation: a,
            ..Grading::default()
        };
        assert_eq!(
            aggregate(&with(ScoreAggregation::Sum), &rs, false).score,
            70.0
        );
        assert_eq!(
            aggregate(&with(ScoreAggregation::Min), &rs, false).score,
            0.0
        );
        assert_eq!(
            aggregate(&with(ScoreAggregation::Max), &rs, false).score,
            50.0
        );
        let avg = aggregate(&with(ScoreAggregation::Avg), &rs, false).score;
        assert_eq!(avg, 23.333333);
    }

    #[test]
    fn ignore_sample_and_accept_if_any() {
        let grading = Grading {
            ignore_sample: true,
            ..Grading::default()
        };
        let r = aggregate(&grading, &[g(WrongAnswer, 0.0), g(Accepted, 50.0)], true);
        assert_eq!(r, g(Accepted, 50.0));
        let grading = Grading {
            accept_if_any_accepted: true,
            verdict_aggregation: VerdictAggregation::FirstError,
            ..Grading::default()
        };
        let r = aggregate(&grading, &[g(Accepted, 50.0), g(WrongAnswer, 0.0)], false);
        assert_eq!(r, g(Accepted, 50.0));
    }

    #[test]
    fn nothing_judged_is_accepted_with_zero() {
        assert_eq!(aggregate(&Grading::default(), &[], false), g(Accepted, 0.0));
    }
}
