//! Judging one submission: languages, compile, run tests, validate, score.
//! Talks to the sandbox only through `sandbox`'s public API (in `boxed.rs`);
//! uses `package` types. Never imports `protocol`, `runner` or `server`.
//!
//! Blocking code: a daemon calls [`Judge::judge`] on `spawn_blocking`; an
//! interactive test runs its two sandboxes on two threads.

mod boxed;
mod capture;
mod cases;
mod compile;
pub mod default_validator;
pub mod details;
mod engine;
mod error;
pub mod grading;
mod interactive;
mod java;
pub mod language;
mod passes;
mod validator;
mod verdict;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::package::{Problem, ProblemKind};

pub use crate::sandbox::{BoxHolder, BoxLock, BoxLockError, plan_cpus, usable_cpus};
pub use details::{PassDetail, TestDetail, TestTiming};
pub use error::{JudgeError, reason};
pub use language::{Language, LanguageConfigError, LanguageTable, Toolchain};
pub use validator::ValidatorCache;
pub use verdict::Verdict;

/// A submission: its language id and its files.
#[derive(Debug, Clone, PartialEq)]
pub struct Submission {
    pub language: String,
    pub files: Vec<SourceFile>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SourceFile {
    /// A plain file name (no directories).
    pub name: String,
    pub content: Vec<u8>,
}

/// Set from any thread to stop a judging in progress: the running sandbox is
/// killed within one supervision tick and `judge` returns [`JudgeError::Cancelled`].
#[derive(Debug, Clone, Default)]
pub struct CancelHandle(crate::sandbox::Cancel);

impl CancelHandle {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn cancel(&self) {
        self.0.cancel();
    }
    pub fn is_cancelled(&self) -> bool {
        self.0.is_cancelled()
    }
    pub(crate) fn sandbox_cancel(&self) -> crate::sandbox::Cancel {
        self.0.clone()
    }
}

/// How to judge this one submission.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Time limit when the package names none (`--time-limit`, a claim's
    /// `time_limit`); 1 s when this is `None` too.
    pub time_limit: Option<f64>,
    pub cancel: CancelHandle,
    /// Run every test even after the verdict is settled (trials want every
    /// test's timings). The verdict and score do not change.
    pub run_all: bool,
}

/// Reported after each test.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub done: usize,
    pub total: usize,
    pub last: TestDetail,
}

/// What judging reached: always a verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub verdict: Verdict,
    pub score: f64,
    pub max_score: f64,
    /// The details document (contract §3), one entry per test run.
    pub details: Vec<TestDetail>,
    /// The compiler's output (empty when it printed nothing or there was no compile step).
    pub compile_log: String,
}

impl Outcome {
    /// Per-test timings (for Trials).
    pub fn timings(&self) -> Vec<TestTiming> {
        self.details.iter().map(TestTiming::from).collect()
    }
}

/// Where a judge runs its sandboxes: one per daemon slot.
#[derive(Debug, Clone)]
pub struct JudgeConfig {
    pub languages: LanguageTable,
    /// Box id of the submission's runs (uid 60000+N, its own cgroup).
    pub box_id: u32,
    /// Box id of a validator running beside the submission (interactive
    /// problems); must not be used by any other slot.
    pub validator_box_id: u32,
    /// Pin runs to this CPU.
    pub cpu: Option<u32>,
    /// Parent cgroup the judge owns.
    pub cgroup_parent: String,
    /// Where work directories go (compiled programs, boxes); temp dir by default.
    pub work_root: Option<PathBuf>,
    /// Compiled custom validators, shared by every slot of a daemon.
    pub validators: Arc<ValidatorCache>,
}

/// Box ids from this offset up are validators' (`validator_box_id` default).
pub const VALIDATOR_BOX_OFFSET: u32 = 500;

/// The largest `box_id` whose validator box's uid (60000 + id) is still a uid:
/// 2^32 - 1 is not one (it is -1, "unchanged", to `setresuid`).
pub const MAX_BOX_ID: u32 = u32::MAX - 1 - crate::sandbox::BOX_UID_BASE - VALIDATOR_BOX_OFFSET;

impl JudgeConfig {
    /// The built-in languages, box `box_id`, the default cgroup parent.
    pub fn new(languages: LanguageTable, box_id: u32) -> Self {
        JudgeConfig {
            languages,
            box_id,
            // Saturating: a `box_id` past `MAX_BOX_ID` is the caller's error, not a panic.
            validator_box_id: box_id.saturating_add(VALIDATOR_BOX_OFFSET),
            cpu: None,
            cgroup_parent: "judge-runner".to_string(),
            work_root: None,
            validators: Arc::new(ValidatorCache::default()),
        }
    }

    /// Every box id this judge runs sandboxes on (its runs', its validator's):
    /// a command takes a [`BoxLock`] on them before its first run and holds it
    /// until it exits.
    pub fn box_ids(&self) -> [u32; 2] {
        [self.box_id, self.validator_box_id]
    }
}

/// The box ids of `slots` judges starting at box `first` (`first..first+slots`)
/// and of their validators (`+ VALIDATOR_BOX_OFFSET`), as a daemon uses them.
pub fn slot_box_ids(first: u32, slots: u32) -> Vec<u32> {
    let runs = (0..slots).map(|i| first.saturating_add(i));
    runs.clone()
        .chain(runs.map(|id| id.saturating_add(VALIDATOR_BOX_OFFSET)))
        .collect()
}

/// A reusable judge: the language table with its probed toolchains, and the
/// sandbox slot it runs in.
#[derive(Debug)]
pub struct Judge {
    config: JudgeConfig,
    toolchains: Mutex<HashMap<String, Result<Toolchain, String>>>,
}

impl Judge {
    pub fn new(config: JudgeConfig) -> Self {
        Judge {
            config,
            toolchains: Mutex::new(HashMap::new()),
        }
    }

    pub fn config(&self) -> &JudgeConfig {
        &self.config
    }

    /// The toolchain of a configured language, probed once (on first use).
    pub fn toolchain(&self, language: &str) -> Result<Toolchain, JudgeError> {
        let unavailable = |why: String| JudgeError::LanguageUnavailable {
            language: language.to_string(),
            why,
        };
        let lang = self
            .config
            .languages
            .get(language)
            .ok_or_else(|| unavailable("not in the language table".to_string()))?;
        let mut cache = self.toolchains.lock().unwrap_or_else(|p| p.into_inner());
        let entry = cache
            .entry(language.to_string())
            .or_insert_with(|| language::probe(lang));
        entry.clone().map_err(unavailable)
    }

    /// Configured languages whose toolchain is on this host, with their versions.
    pub fn available_languages(&self) -> Vec<(String, Toolchain)> {
        let ids: Vec<String> = self.config.languages.ids().map(str::to_string).collect();
        ids.into_iter()
            .filter_map(|id| self.toolchain(&id).ok().map(|t| (id, t)))
            .collect()
    }

    /// Runs `/bin/true` in this judge's submission box and in its validator box,
    /// as a judging would. A daemon does this for every slot before it claims
    /// anything: a sandbox that cannot work here (no cgroup controllers, a box id
    /// another process holds, a root that cannot be made private) would
    /// otherwise fail every job the daemon took.
    pub fn self_test(&self) -> Result<(), JudgeError> {
        const WHAT: &str = "running the start-up self-test (/bin/true)";
        let work = boxed::WorkDir::new(self.config.work_root.as_deref())?;
        let cancel = CancelHandle::new();
        let slot = boxed::JudgeSlot::new(&self.config, &cancel);
        for (validator_box, dir) in [(false, "self-test"), (true, "self-test-validator")] {
            let dir = work.fresh(dir)?;
            let report = slot.run(
                WHAT,
                boxed::BoxRun {
                    argv: vec!["/bin/true".to_string()],
                    box_dir: &dir,
                    validator_box,
                    binds: Vec::new(),
                    stdin: boxed::Stream::Null,
                    stdout: boxed::Stream::Null,
                    stderr: boxed::Stream::Null,
                    limits: boxed::BoxLimits {
                        time: 5.0,
                        wall: 10.0,
                        memory_bytes: 64 << 20,
                        processes: 4,
                        output_bytes: 1 << 20,
                    },
                    env: Vec::new(),
                },
            )?;
            if report.status != boxed::BoxStatus::Ok {
                return Err(JudgeError::RunFailed {
                    what: WHAT.to_string(),
                    message: format!("/bin/true ended {}", report.status.as_str()),
                });
            }
        }
        Ok(())
    }

    /// Judges a submission. `Ok` always carries a verdict; `Err` means the
    /// infrastructure failed and there is none.
    pub fn judge(
        &self,
        problem: &Problem,
        submission: &Submission,
        options: &Options,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Outcome, JudgeError> {
        let language = self
            .config
            .languages
            .get(&submission.language)
            .ok_or_else(|| JudgeError::LanguageUnavailable {
                language: submission.language.clone(),
                why: "not in the language table".to_string(),
            })?;
        let toolchain = self.toolchain(&submission.language)?;
        let total = problem.cases().len();
        if total == 0 {
            return Err(JudgeError::package("the package has no test cases"));
        }
        let work = boxed::WorkDir::new(self.config.work_root.as_deref())?;
        let slot = boxed::JudgeSlot::new(&self.config, &options.cancel);
        let max_score = match problem.kind {
            ProblemKind::PassFail => 1.0,
            ProblemKind::Scoring => grading::max_score(&problem.data),
        };
        let validators =
            self.config
                .validators
                .prepare(problem, &self.config.languages, &slot, |id| {
                    self.toolchain(id)
                })?;
        let compiled = compile::compile(&slot, &work, language, &toolchain, submission, problem)?;
        let program = match compiled {
            compile::Compiled::Program(program) => program,
            compile::Compiled::Failed { log } => {
                return Ok(Outcome {
                    verdict: Verdict::CompilationError,
                    score: 0.0,
                    max_score,
                    details: Vec::new(),
                    compile_log: log,
                });
            }
        };
        let mut runner = TestRunner(cases::SandboxCases::new(
            &slot,
            &work,
            problem,
            options,
            &program,
            &validators,
        ));
        let mode = engine::WalkMode {
            pass_fail: problem.kind == ProblemKind::PassFail,
            run_all: options.run_all,
        };
        let walked = engine::Walk::new(&mut runner, mode, total, progress).run(&problem.data)?;
        let (verdict, score) = match problem.kind {
            ProblemKind::PassFail => {
                let verdict = walked.first_failure.unwrap_or(Verdict::Accepted);
                (verdict, if verdict.is_accepted() { 1.0 } else { 0.0 })
            }
            ProblemKind::Scoring => (walked.root.verdict, walked.root.score),
        };
        Ok(Outcome {
            verdict,
            score,
            max_score,
            details: walked.details,
            compile_log: program.log.clone(),
        })
    }
}

/// Runs each test as the problem's type asks: the submission alone and then
/// the output validator, or the two talking to each other (interactive); in
/// one pass, or in as many as the validator asks for (multi-pass).
struct TestRunner<'a>(cases::SandboxCases<'a>);

impl engine::CaseRunner for TestRunner<'_> {
    fn run_case(
        &mut self,
        case: &crate::package::TestCase,
        group: &crate::package::TestGroup,
    ) -> Result<engine::CaseRun, JudgeError> {
        let cases = &self.0;
        let vboxes = cases.validator_boxes()?;
        let mut one_pass = |pass: &cases::Pass<'_>| {
            if cases.problem.interactive {
                interactive::run(cases, case, group, pass)
            } else {
                cases.run_plain(case, group, pass)
            }
        };
        if cases.problem.multi_pass {
            return passes::run(cases, case, &vboxes, &mut one_pass);
        }
        let only = cases::Pass {
            input: None,
            vboxes: &vboxes,
        };
        one_pass(&only).map(|pass| pass.run)
    }

    fn cancelled(&self) -> bool {
        self.0.slot.cancelled()
    }
}
