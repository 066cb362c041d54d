//! Every bundled example submission (`examples/problems/*/submissions/<verdict>/`)
//! through a real `serve` and a real `daemon`: the verdict of its folder, with
//! `details` and `log` attached; the accepted `.py` ones also as pypy3.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod e2e_common;

use std::time::Duration;

use e2e_common::*;
use judge_runner::protocol::JobState;

#[tokio::test(flavor = "multi_thread")]
async fn every_example_submission_gets_its_folder_verdict() {
    let scene = Scene::new("examples");
    // The examples are in every language of the table (contract §7), beyond
    // the Server's default five.
    let all: Vec<String> = judge_runner::judge::LanguageTable::builtin()
        .unwrap()
        .ids()
        .map(String::from)
        .collect();
    let serve = Serve::start_with(
        &ServeOpts::sqlite(scene.dir.path(), 60),
        &scene.path("serve.log"),
        &["--languages", &all.join(",")],
    );
    let manager = serve.manager();
    let problems = judge_runner::demo::load(&examples_dir()).unwrap();
    assert!(problems.len() >= 5, "bundled example problems missing");
    let mut submitted = Vec::new();
    // Their details list every pass of a test (contract §7).
    let multi_pass: Vec<&str> = problems
        .iter()
        .filter(|p| p.problem.multi_pass)
        .map(|p| p.name.as_str())
        .collect();
    assert!(multi_pass.len() >= 2, "multi-pass examples missing");
    for problem in &problems {
        let (problem_id, _) = upload(&manager, &problem.dir).await;
        for case in &problem.cases {
            let created = manager
                .submit(problem_id, &case.language, case.files.clone())
                .await
                .unwrap();
            submitted.push((case, created.job_id));
        }
    }
    assert!(
        submitted.len() >= 40,
        "only {} example submissions",
        submitted.len()
    );
    let runner = manager.create_runner("examples").await.unwrap();
    let _daemon = Daemon::start(
        &DaemonOpts {
            server: &serve.url,
            key: &runner.key,
            first_box: 3000,
            slots: 1,
            cache: &scene.path("cache"),
            cgroup_parent: &scene.cgroup_parent,
            tmp: scene.dir.path(),
        },
        &scene.path("daemon.log"),
    );
    let mut mismatches = Vec::new();
    for (case, job) in &submitted {
        let done = wait_job(&manager, *job, Duration::from_secs(600), "final", is_final).await;
        let Some(result) = done
            .result
            .as_ref()
            .filter(|_| done.state == JobState::Completed)
        else {
            mismatches.push(format!(
                "{}: {} {:?}",
                case.label, done.state, done.failure_reason
            ));
            continue;
        };
        if !case.matches(&result.verdict, result.score, result.max_score) {
            mismatches.push(format!(
                "{}: {} {}/{}",
                case.label, result.verdict, result.score, result.max_score
            ));
        }
        assert!(
            done.files.contains(&"details".to_string()) && done.files.contains(&"log".to_string()),
            "{}: files {:?}",
            case.label,
            done.files
        );
        let details: serde_json::Value =
            serde_json::from_slice(&manager.file(*job, "details").await.unwrap()).unwrap();
        let tests = details.as_array().unwrap();
        if case.folder == "compile_error" {
            assert!(tests.is_empty(), "{}", case.label);
            assert!(
                !manager.file(*job, "log").await.unwrap().is_empty(),
                "{}: empty compile log",
                case.label
            );
        } else {
            assert!(!tests.is_empty(), "{}: no test in details", case.label);
            for key in [
                "name",
                "group",
                "verdict",
                "cpu_seconds",
                "wall_seconds",
                "memory_bytes",
                "exit_code",
                "signal",
                "score",
                "judge_message",
            ] {
                assert!(
                    tests[0].get(key).is_some(),
                    "{}: details lack {key}",
                    case.label
                );
            }
            let passes = tests[0]["passes"].as_array();
            if multi_pass.contains(&case.problem.as_str()) {
                assert!(
                    passes.is_some_and(|p| !p.is_empty()),
                    "{}: no passes in details",
                    case.label
                );
            } else {
                assert!(passes.is_none(), "{}: passes in details", case.label);
            }
        }
        assert_eq!(
            result.runner_version.as_deref(),
            Some(judge_runner::version::RUNNER_VERSION)
        );
    }
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}
