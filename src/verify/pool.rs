//! N judges side by side, each on its own box ids and CPU, taking submissions
//! from one queue; rows go back to the caller's thread as they finish.

use std::collections::VecDeque;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use super::plan::Entry;
use super::{Config, Row};
use crate::judge::{Judge, JudgeConfig, Options, VALIDATOR_BOX_OFFSET, ValidatorCache, plan_cpus};
use crate::package::Problem;

/// One judge per slot: box `first_box + i`, its validator on `+500`, pinned to
/// its CPU; every slot shares one compiled-validator cache.
pub(super) fn judges(config: &Config) -> Vec<Judge> {
    let validators = Arc::new(ValidatorCache::default());
    let cpus = plan_cpus(config.slots, config.pin_cpus);
    (0..config.slots)
        .map(|i| {
            let box_id = config.first_box + u32::try_from(i).unwrap_or(u32::MAX);
            let mut jc = JudgeConfig::new(config.languages.clone(), box_id);
            jc.validator_box_id = box_id.saturating_add(VALIDATOR_BOX_OFFSET);
            jc.cpu = cpus[i];
            jc.cgroup_parent.clone_from(&config.cgroup_parent);
            jc.work_root.clone_from(&config.work_root);
            jc.validators = Arc::clone(&validators);
            Judge::new(jc)
        })
        .collect()
}

/// Judges `batch` (indexes into `entries`) on `judges`, calling `done` on this
/// thread for each row as it is ready.
pub(super) fn judge_all(
    judges: &[Judge],
    problem: &Problem,
    entries: &[Entry],
    batch: Vec<usize>,
    time_limit: Option<f64>,
    done: &mut dyn FnMut(usize, Row),
) {
    let queue = Mutex::new(VecDeque::from(batch));
    let (tx, rx) = mpsc::channel::<(usize, Row)>();
    std::thread::scope(|scope| {
        for judge in judges {
            let tx = tx.clone();
            let queue = &queue;
            scope.spawn(move || {
                loop {
                    let next = queue.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
                    let Some(i) = next else { break };
                    let row = judge_one(judge, problem, &entries[i], time_limit);
                    if tx.send((i, row)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for (i, row) in rx {
            done(i, row);
        }
    });
}

fn judge_one(judge: &Judge, problem: &Problem, entry: &Entry, time_limit: Option<f64>) -> Row {
    let mut row = Row::new(entry);
    let options = Options {
        time_limit,
        ..Options::default()
    };
    match judge.judge(problem, &entry.submission, &options, &mut |_| {}) {
        Ok(outcome) => {
            // A multi-pass test's slowest pass: the limit applies to each.
            row.max_cpu_seconds = outcome
                .details
                .iter()
                .map(|d| d.slowest_cpu_seconds())
                .reduce(f64::max);
            row.ok = entry
                .expected
                .matches(outcome.verdict, outcome.score, outcome.max_score)
                .unwrap_or(true);
            row.verdict = Some(outcome.verdict);
            row.score = Some(outcome.score);
            row.max_score = Some(outcome.max_score);
        }
        Err(e) => {
            row.ok = false;
            row.error = Some(format!("{} ({})", e, e.reason()));
        }
    }
    row
}
