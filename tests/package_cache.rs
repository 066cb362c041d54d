//! The cache against a real HTTP server on 127.0.0.1:0: download once, checksum
//! mismatch, transient failures retried, 4xx not, single flight within a process,
//! eviction to the budget sparing entries in use, start-up cleanup.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod package_common;

use std::path::Path;
use std::time::Duration;

use judge_runner::package::{
    self, Cache, FetchFailure, FetchPolicy, PackageError, ServerKey, UnpackLimits,
};
use package_common::{
    Item, Reply, TestServer, problem_dir, sha256_hex, tar_gz_bytes, tar_gz_of_dir, tree,
};

fn quick_policy() -> FetchPolicy {
    FetchPolicy {
        attempts: 3,
        first_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(100),
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(5),
    }
}

fn open(root: &Path, budget: u64) -> Cache {
    Cache::open_with(root, budget, UnpackLimits::default(), quick_policy()).unwrap()
}

/// The `greet` fixture package as served bytes, with its SHA-256.
fn hello() -> (Vec<u8>, String) {
    let bytes = tar_gz_of_dir(&problem_dir("greet"), "greet/");
    let sha = sha256_hex(&bytes);
    (bytes, sha)
}

/// Nothing but complete entries (and the lock files) in the cache directory, once
/// evicted entries finished deleting in the background.
fn assert_clean(root: &Path) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !tree(&root.join("tmp")).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        tree(&root.join("tmp")).is_empty(),
        "tmp: {:?}",
        tree(&root.join("tmp"))
    );
    for entry in std::fs::read_dir(root).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "tmp" || name == "locks" {
            continue;
        }
        assert!(
            entry.path().join(".judge-runner-complete").is_file(),
            "incomplete entry {name}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn download_then_cache_hit_without_http() {
    let server = TestServer::start().await;
    let (bytes, sha) = hello();
    server.add("hello", bytes);
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), 1 << 30);

    let entry = cache.get(&server.url("hello"), &sha).await.unwrap();
    assert_eq!(entry.path(), dir.path().join(&sha));
    assert_eq!(entry.sha256(), sha);
    let problem = package::parse(&entry.problem_root().unwrap()).unwrap();
    assert_eq!(problem.name, "Greet the Judge");
    assert_eq!(server.hits("hello"), 1);
    drop(entry);

    let again = cache
        .get(&server.url("hello"), &sha.to_uppercase())
        .await
        .unwrap();
    assert_eq!(again.path(), dir.path().join(&sha));
    assert_eq!(server.hits("hello"), 1, "a cache hit makes no HTTP call");

    // Another Cache on the same directory (a restarted daemon) keeps the entry.
    drop(again);
    let reopened = open(dir.path(), 1 << 30);
    reopened
        .get("http://127.0.0.1:9/unused", &sha)
        .await
        .unwrap();
    assert_eq!(server.hits("hello"), 1);
    assert_eq!(reopened.entries().len(), 1);
    assert_clean(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checksum_mismatch_leaves_nothing() {
    let server = TestServer::start().await;
    let (bytes, _) = hello();
    server.add("hello", bytes);
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), 1 << 30);
    let wanted = sha256_hex(b"another package");
    let err = cache.get(&server.url("hello"), &wanted).await.unwrap_err();
    assert_eq!(err.code(), "package.checksum_mismatch", "{err}");
    assert!(!err.retryable());
    assert!(
        matches!(err, PackageError::ChecksumMismatch { ref expected, .. } if *expected == wanted)
    );
    assert_eq!(server.hits("hello"), 1, "a mismatch is not retried");
    assert!(cache.entries().is_empty());
    assert!(!dir.path().join(&wanted).exists());
    assert_clean(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_are_retried_until_success() {
    let server = TestServer::start().await;
    let (bytes, sha) = hello();
    server.add("hello", bytes);
    server.script("hello", vec![Reply::Status(500), Reply::Status(503)]);
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), 1 << 30);
    cache.get(&server.url("hello"), &sha).await.unwrap();
    assert_eq!(server.hits("hello"), 3);
    assert_clean(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_body_is_retried() {
    let server = TestServer::start().await;
    let (bytes, sha) = hello();
    server.add("hello", bytes);
    server.script("hello", vec![Reply::Truncated]);
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), 1 << 30);
    cache.get(&server.url("hello"), &sha).await.unwrap();
    assert_eq!(server.hits("hello"), 2);

    server.script("big", vec![Reply::Truncated; 3]);
    let big = tar_gz_bytes(&[Item::File("data/secret/1.in", &vec![9u8; 200_000])]);
    let big_sha = sha256_hex(&big);
    server.add("big", big);
    let err = cache.get(&server.url("big"), &big_sha).await.unwrap_err();
    assert_eq!(err.code(), "package.fetch_failed", "{err}");
    assert!(err.retryable());
    assert_eq!(server.hits("big"), 3, "bounded attempts");
    assert!(
        matches!(err, PackageError::Fetch { attempts: 3, .. }),
        "{err:?}"
    );
    assert_clean(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_errors_are_not_retried() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), 1 << 30);
    let sha = sha256_hex(b"x");
    let err = cache.get(&server.url("missing"), &sha).await.unwrap_err();
    assert_eq!(server.hits("missing"), 1);
    assert!(matches!(
        err,
        PackageError::Fetch {
            failure: FetchFailure::Status(404),
            attempts: 1,
            ..
        }
    ));
    assert_eq!(err.code(), "package.fetch_failed");

    let (bytes, sha) = hello();
    server.add("hello", bytes);
    server.script("hello", vec![Reply::Status(403)]);
    assert!(cache.get(&server.url("hello"), &sha).await.is_err());
    assert_eq!(server.hits("hello"), 1);
    // A URL that cannot be requested at all fails once.
    let err = cache.get("/api/packages/relative", &sha).await.unwrap_err();
    assert!(
        matches!(err, PackageError::Fetch { attempts: 1, .. }),
        "{err:?}"
    );
    // Refused connections are transient: retried, then reported retryable.
    let err = cache
        .get("http://127.0.0.1:9/none", &sha)
        .await
        .unwrap_err();
    assert!(err.retryable(), "{err}");
    assert!(
        matches!(err, PackageError::Fetch { attempts: 3, .. }),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_concurrent_tasks_share_one_download() {
    let server = TestServer::start().await;
    let (bytes, sha) = hello();
    server.add("hello", bytes);
    server.delay_all(Duration::from_millis(300));
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), 1 << 30);
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (cache, url, sha) = (cache.clone(), server.url("hello"), sha.clone());
            tokio::spawn(async move { cache.get(&url, &sha).await.map(|e| e.path().to_path_buf()) })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap().unwrap(), dir.path().join(&sha));
    }
    assert_eq!(server.hits("hello"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_tasks_share_one_failure() {
    let server = TestServer::start().await;
    let (bytes, _) = hello();
    server.add("hello", bytes);
    server.delay_all(Duration::from_millis(300));
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), 1 << 30);
    let wanted = sha256_hex(b"not hello");
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (cache, url, sha) = (cache.clone(), server.url("hello"), wanted.clone());
            tokio::spawn(async move { cache.get(&url, &sha).await.map(|_| ()) })
        })
        .collect();
    for task in tasks {
        let err = task.await.unwrap().unwrap_err();
        assert_eq!(err.code(), "package.checksum_mismatch");
    }
    assert_eq!(server.hits("hello"), 1);
    assert_clean(dir.path());
}

/// A package of `size` bytes of test data, distinct per `tag`.
fn sized_package(tag: u8, size: usize) -> (Vec<u8>, String) {
    let data: Vec<u8> = (0..size)
        .map(|i| u8::try_from(i % 251).unwrap_or(0).wrapping_mul(31) ^ tag)
        .collect();
    let bytes = tar_gz_bytes(&[
        Item::File("data/secret/1.in", &data),
        Item::File("data/secret/1.ans", b""),
    ]);
    let sha = sha256_hex(&bytes);
    (bytes, sha)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_respects_budget_and_pins() {
    let server = TestServer::start().await;
    let size = 100_000;
    let packages: Vec<(Vec<u8>, String)> = (1..=4).map(|t| sized_package(t, size)).collect();
    for (i, (bytes, _)) in packages.iter().enumerate() {
        server.add(&format!("p{i}"), bytes.clone());
    }
    let dir = tempfile::tempdir().unwrap();
    let budget = 2 * size as u64 + 1000;
    let cache = open(dir.path(), budget);
    let get = |i: usize| {
        let cache = cache.clone();
        let (url, sha) = (server.url(&format!("p{i}")), packages[i].1.clone());
        async move { cache.get(&url, &sha).await.unwrap() }
    };
    let shas =
        |cache: &Cache| -> Vec<String> { cache.entries().into_iter().map(|e| e.0).collect() };
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };

    let pinned_a = get(0).await; // oldest, but in use
    tokio::time::sleep(Duration::from_millis(20)).await;
    drop(get(1).await);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let c = get(2).await;
    assert_eq!(
        shas(&cache),
        sorted(vec![packages[0].1.clone(), packages[2].1.clone()]),
        "B (least recently used and not pinned) was evicted, A kept while in use"
    );
    assert!(pinned_a.path().join("data/secret/1.in").is_file());
    let total: u64 = cache.entries().iter().map(|e| e.1).sum();
    assert!(total <= budget, "{total} > {budget}");

    drop(pinned_a);
    drop(c);
    tokio::time::sleep(Duration::from_millis(20)).await;
    drop(get(3).await);
    assert_eq!(
        shas(&cache),
        sorted(vec![packages[2].1.clone(), packages[3].1.clone()]),
        "A, now unpinned and least recently used, went"
    );
    assert_clean(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entry_bigger_than_the_budget_is_still_served() {
    let server = TestServer::start().await;
    let (bytes, sha) = sized_package(9, 50_000);
    server.add("p", bytes);
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), 1000);
    let entry = cache.get(&server.url("p"), &sha).await.unwrap();
    assert!(entry.path().join("data/secret/1.in").is_file());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_download_is_refused() {
    let server = TestServer::start().await;
    let (bytes, sha) = sized_package(3, 300_000);
    server.add("p", bytes);
    let dir = tempfile::tempdir().unwrap();
    let limits = UnpackLimits {
        max_entries: 100,
        max_unpacked: 1000,
    };
    let cache = Cache::open_with(dir.path(), 1 << 30, limits, quick_policy()).unwrap();
    let err = cache.get(&server.url("p"), &sha).await.unwrap_err();
    assert!(
        matches!(
            err,
            PackageError::Fetch {
                failure: FetchFailure::TooLarge { limit: 1000 },
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.code(), "package.invalid");
    assert_eq!(server.hits("p"), 1);
    assert_clean(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_package_is_refused_and_not_cached() {
    let server = TestServer::start().await;
    let bytes = tar_gz_bytes(&[
        Item::File("data/secret/1.in", b"x"),
        Item::Symlink("e", "/etc"),
    ]);
    let sha = sha256_hex(&bytes);
    server.add("evil", bytes);
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), 1 << 30);
    let err = cache.get(&server.url("evil"), &sha).await.unwrap_err();
    assert!(matches!(err, PackageError::Unsafe { .. }), "{err:?}");
    assert!(!err.retryable());
    assert!(cache.entries().is_empty());
    assert_clean(dir.path());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archive_cannot_forge_or_redirect_the_marker() {
    let server = TestServer::start().await;
    let forged = tar_gz_bytes(&[
        Item::File("data/secret/1.in", b"keep me"),
        Item::File("data/secret/1.ans", b""),
        Item::Symlink(".judge-runner-complete", "data/secret/1.in"),
    ]);
    let sha = sha256_hex(&forged);
    server.add("forged", forged);
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), 1 << 30);
    let entry = cache.get(&server.url("forged"), &sha).await.unwrap();
    assert_eq!(
        std::fs::read(entry.path().join("data/secret/1.in")).unwrap(),
        b"keep me"
    );
    let marker = entry.path().join(".judge-runner-complete");
    assert!(
        std::fs::symlink_metadata(&marker)
            .unwrap()
            .file_type()
            .is_file()
    );
    assert_eq!(cache.entries(), [(sha, 7)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downloads_through_the_callers_client_with_its_key() {
    let server = TestServer::start().await;
    let (bytes, sha) = hello();
    server.add("hello", bytes);
    server.require_token("runner-key");
    let dir = tempfile::tempdir().unwrap();
    let anonymous = open(dir.path(), 1 << 30);
    let err = anonymous.get(&server.url("hello"), &sha).await.unwrap_err();
    assert!(matches!(
        err,
        PackageError::Fetch {
            failure: FetchFailure::Status(401),
            attempts: 1,
            ..
        }
    ));
    drop(anonymous);
    let key = ServerKey::new(&format!("http://{}", server.addr), "runner-key").unwrap();
    let keyed = Cache::open_with_key(
        dir.path(),
        1 << 30,
        UnpackLimits::default(),
        quick_policy(),
        Some(key),
    )
    .unwrap();
    keyed.get(&server.url("hello"), &sha).await.unwrap();
    assert_eq!(server.hits("hello"), 2);
}

/// The key goes to its origin only (CONTRACT §5): a package URL on another
/// origin (another port here, as a CDN would be another host) is fetched
/// without it, and so is one the Server's origin redirects to another origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_goes_to_its_origin_only() {
    let server = TestServer::start().await;
    let cdn = TestServer::start().await;
    let (bytes, sha) = hello();
    let (other_bytes, other_sha) = {
        let bytes = tar_gz_bytes(&[Item::File("problem.yaml", b"name: other\n")]);
        let sha = sha256_hex(&bytes);
        (bytes, sha)
    };
    server.add("own", bytes.clone());
    cdn.add("hello", bytes);
    cdn.add("other", other_bytes);
    server.add("moved", Vec::new());
    server.script("moved", vec![Reply::Redirect(cdn.url("other"))]);
    let dir = tempfile::tempdir().unwrap();
    // Written with the default port left implicit or not, the origin is the same.
    let key = ServerKey::new(&format!("http://{}/", server.addr), "runner-key").unwrap();
    assert!(key.applies_to(&server.url("own")));
    assert!(!key.applies_to(&cdn.url("hello")));
    let default_port = ServerKey::new("https://judge.example", "k").unwrap();
    assert!(default_port.applies_to("https://judge.example:443/api/packages/x"));
    assert!(!default_port.applies_to("http://judge.example/api/packages/x"));
    assert!(!default_port.applies_to("https://cdn.judge.example/x"));

    let cache = Cache::open_with_key(
        dir.path(),
        1 << 30,
        UnpackLimits::default(),
        quick_policy(),
        Some(key),
    )
    .unwrap();
    cache.get(&server.url("own"), &sha).await.unwrap();
    assert_eq!(
        server.authorizations(),
        vec![Some("Bearer runner-key".to_string())],
        "the Server's origin gets the key"
    );
    // A cache hit would not ask anybody: a fresh cache for the same bytes.
    let dir2 = tempfile::tempdir().unwrap();
    let key = ServerKey::new(&format!("http://{}", server.addr), "runner-key").unwrap();
    let other = Cache::open_with_key(
        dir2.path(),
        1 << 30,
        UnpackLimits::default(),
        quick_policy(),
        Some(key),
    )
    .unwrap();
    other.get(&cdn.url("hello"), &sha).await.unwrap();
    other.get(&server.url("moved"), &other_sha).await.unwrap();
    assert_eq!(cdn.hits("hello"), 1);
    assert_eq!(cdn.hits("other"), 1);
    assert_eq!(
        cdn.authorizations(),
        vec![None, None],
        "another origin never sees the key, asked directly or redirected to"
    );
    assert_eq!(
        server.authorizations().len(),
        2,
        "the redirect came from the Server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_sha256_is_refused_before_any_request() {
    let server = TestServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path(), 1 << 30);
    let err = cache.get(&server.url("x"), "abc").await.unwrap_err();
    assert!(matches!(err, PackageError::BadSha256 { .. }));
    assert_eq!(server.hits("x"), 0);
}

#[test]
fn start_up_removes_leftovers_and_keeps_complete_entries() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let complete = sha256_hex(b"complete");
    let incomplete = sha256_hex(b"incomplete");
    package_common::write_file(&root.join(&complete).join("data/x"), b"1");
    package_common::write_file(
        &root.join(&complete).join(".judge-runner-complete"),
        b"{\"bytes\": 1}",
    );
    package_common::write_file(&root.join(&incomplete).join("data/x"), b"1");
    package_common::write_file(
        &root.join("tmp").join(format!("{complete}.download.1.0")),
        b"partial",
    );
    package_common::write_file(
        &root
            .join("tmp")
            .join(format!("{incomplete}.unpack.1.1/data/y")),
        b"",
    );
    package_common::write_file(&root.join(".gitignore"), b"*\n");

    let cache = open(root, 1 << 30);
    assert_eq!(cache.entries(), [(complete.clone(), 1)]);
    assert!(!root.join(&incomplete).exists());
    assert!(tree(&root.join("tmp")).is_empty());
    assert!(
        root.join(".gitignore").is_file(),
        "foreign files are left alone"
    );
}
