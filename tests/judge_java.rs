//! Java as DOMjudge and Kattis judge it (contract §2, 2026-12): the main class
//! is the class declaring `public static void main(String[])`, with its
//! package, whatever the files are called; several: the first source's; none:
//! Compilation Error. The JVM starts under the memory limit and a program using
//! too much memory is Memory Limit Exceeded (or Run-Time Error), and its own
//! threads leave the submission its threads.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::tests_outside_test_module
)]

mod judge_common;

use std::path::Path;

use judge_runner::judge::{Options, Outcome, SourceFile, Submission, Verdict};
use judge_runner::package;

/// "Echo the number", one secret test, `memory` MiB.
fn echo_problem(memory: u32) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let yaml = format!("name: echo\nlimits: {{time_limit: 5, memory: {memory}}}\n");
    std::fs::write(p.join("problem.yaml"), yaml).unwrap();
    std::fs::create_dir_all(p.join("data/secret")).unwrap();
    std::fs::write(p.join("data/secret/1.in"), "42\n").unwrap();
    std::fs::write(p.join("data/secret/1.ans"), "42\n").unwrap();
    dir
}

fn java(files: &[(&str, &str)]) -> Submission {
    Submission {
        language: "java".to_string(),
        files: files
            .iter()
            .map(|(name, text)| SourceFile {
                name: (*name).to_string(),
                content: text.as_bytes().to_vec(),
            })
            .collect(),
    }
}

fn judge(dir: &Path, submission: &Submission) -> Outcome {
    let problem = package::parse(dir).unwrap();
    judge_common::judge()
        .judge(&problem, submission, &Options::default(), &mut |_| {})
        .unwrap()
}

fn assert_verdict(out: &Outcome, want: Verdict) {
    assert_eq!(
        out.verdict, want,
        "log:\n{}\ndetails: {:?}",
        out.compile_log, out.details
    );
}

const ECHO_MAIN: &str = "import java.util.Scanner;
class Main {
    public static void main(String[] args) {
        System.out.println(new Scanner(System.in).nextLong());
    }
}
";

#[test]
fn a_class_not_named_after_its_file() {
    let _serial = judge_common::serial();
    let dir = echo_problem(1024);
    let out = judge(dir.path(), &java(&[("hello.java", ECHO_MAIN)]));
    assert_verdict(&out, Verdict::Accepted);
    // A public class, which javac wants in a file of its name: written so.
    let public = format!(
        "public {}",
        ECHO_MAIN.replace("import java.util.Scanner;\n", "")
    )
    .replace("new Scanner", "new java.util.Scanner");
    let out = judge(dir.path(), &java(&[("hello.java", &public)]));
    assert_verdict(&out, Verdict::Accepted);
}

#[test]
fn a_class_in_a_package() {
    let _serial = judge_common::serial();
    let dir = echo_problem(1024);
    let src = "package contest.solutions;

import java.io.*;

public class Solution {
    public static void main(String[] args) throws IOException {
        System.out.println(new BufferedReader(new InputStreamReader(System.in)).readLine().trim());
    }
}
";
    let out = judge(dir.path(), &java(&[("sol.java", src)]));
    assert_verdict(&out, Verdict::Accepted);
}

#[test]
fn a_source_without_main_is_a_compilation_error() {
    let _serial = judge_common::serial();
    let dir = echo_problem(1024);
    // Mains that are not entry points, and one in a comment and a string.
    let src = "class Helper {
    // public static void main(String[] args) {}
    static String s = \"public static void main(String[] args)\";
    public void main(String[] args) {}
    static void main(int x) {}
    public static int main() { return 0; }
}
";
    let out = judge(dir.path(), &java(&[("Main.java", src)]));
    assert_verdict(&out, Verdict::CompilationError);
    assert!(
        out.compile_log
            .contains("no class declares `public static void main(String[])`"),
        "{}",
        out.compile_log
    );
}

#[test]
fn the_main_class_is_found_whatever_the_source_looks_like() {
    let _serial = judge_common::serial();
    let dir = echo_problem(1024);
    let src = "import java.util.*;

/* class Decoy { public static void main(String[] args) { } } */
@SuppressWarnings(\"unchecked\")
final class Real<T extends Comparable<T>> {
    static final String DECOY = \"class Fake { public static void main(String[] a) {} }\";
    @Deprecated
    public static strictfp void main(final String... args) {
        List<Map<String, List<Long>>> nested = new ArrayList<>();
        nested.add(new HashMap<>());
        System.out.println(new Scanner(System.in).nextLong());
    }
    static class Inner {
        public static void main(String[] args) { System.out.println(-1); }
    }
}
";
    let out = judge(dir.path(), &java(&[("whatever.java", src)]));
    assert_verdict(&out, Verdict::Accepted);
}

#[test]
fn several_files_and_several_mains_the_first_sources_wins() {
    let _serial = judge_common::serial();
    let dir = echo_problem(1024);
    let first = "package p;
public class Zeta {
    public static void main(String[] args) {
        System.out.println(q.Util.read());
    }
}
";
    let util = "package q;
public class Util {
    public static long read() { return new java.util.Scanner(System.in).nextLong(); }
    public static void main(String[] args) { System.out.println(0); }
}
";
    let other = "public class Alpha { public static void main(String[] args) { System.out.println(1); } }\n";
    // Given in this order: Zeta's file first (by name it would be last).
    let sub = java(&[
        ("zeta.java", first),
        ("alpha.java", other),
        ("util.java", util),
    ]);
    let out = judge(dir.path(), &sub);
    assert_verdict(&out, Verdict::Accepted);
    // The same files in another order: Alpha's main runs and prints 1.
    let sub = java(&[
        ("alpha.java", other),
        ("zeta.java", first),
        ("util.java", util),
    ]);
    let out = judge(dir.path(), &sub);
    assert_verdict(&out, Verdict::WrongAnswer);
}

#[test]
fn the_jvm_starts_under_a_small_memory_limit_and_a_heavy_program_is_mle_or_rte() {
    let _serial = judge_common::serial();
    let dir = echo_problem(64);
    let out = judge(dir.path(), &java(&[("hello.java", ECHO_MAIN)]));
    assert_verdict(&out, Verdict::Accepted);
    // 100 GB of arrays, kept: far past the heap bound and the cgroup.
    let heavy = "import java.util.*;
class Heavy {
    public static void main(String[] args) {
        List<long[]> keep = new ArrayList<>();
        long sum = 0;
        for (int i = 0; i < 100000; i++) {
            long[] block = new long[1 << 17];
            Arrays.fill(block, i);
            keep.add(block);
            sum += block[7];
        }
        System.out.println(sum);
    }
}
";
    let out = judge(dir.path(), &java(&[("heavy.java", heavy)]));
    assert!(
        matches!(
            out.verdict,
            Verdict::MemoryLimitExceeded | Verdict::RunTimeError
        ),
        "{:?} {:?}",
        out.verdict,
        out.details
    );
}

#[test]
fn the_jvms_threads_leave_the_submission_its_threads() {
    let _serial = judge_common::serial();
    let dir = echo_problem(1024);
    // 16 threads alive at once (what every language's run allows), on top of
    // the JVM's own.
    let src = "import java.util.*;
import java.util.concurrent.*;
class Threads {
    public static void main(String[] args) throws Exception {
        long n = new Scanner(System.in).nextLong();
        CountDownLatch all = new CountDownLatch(16);
        List<Thread> ts = new ArrayList<>();
        for (int i = 0; i < 16; i++) {
            Thread t = new Thread(() -> {
                all.countDown();
                try { all.await(); } catch (InterruptedException e) { }
            });
            t.start();
            ts.add(t);
        }
        for (Thread t : ts) t.join();
        System.out.println(n);
    }
}
";
    let out = judge(dir.path(), &java(&[("threads.java", src)]));
    assert_verdict(&out, Verdict::Accepted);
}
