//! The command line, exactly as `../shared/CONTRACT.md` names it. Only definitions
//! live here; `commands/` turns parsed arguments into calls of the modules.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;

use clap::{Args, Parser, Subcommand};

use crate::units::{ByteSize, Seconds};

#[derive(Debug, Parser)]
#[command(
    name = "judge-runner",
    version = crate::version::RUNNER_VERSION,
    about = "Sandboxed judging of submissions against Kattis/ICPC problem packages, \
             and the Server/Runner protocol around it",
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one program in a sandbox (namespaces, cgroup, seccomp, per-box uid)
    Sandbox(SandboxArgs),
    /// Evaluate one submission locally against a problem package
    Judge(JudgeArgs),
    /// Check or fetch problem packages
    #[command(subcommand)]
    Package(PackageCommand),
    /// Run the Server: jobs, leases, results (SQLite or PostgreSQL)
    Serve(ServeArgs),
    /// Run the Runner daemon: claim jobs from a Server and evaluate them
    Daemon(DaemonArgs),
    /// Run a forwarding Runner: claim jobs from a Server and have another Server judge them
    Forward(ForwardArgs),
    /// Run the whole system on this machine with the bundled example problems
    Demo(DemoArgs),
    /// Check that this host can judge, and measure its sandbox's overhead
    Check(CheckArgs),
    /// Judge a package's own example submissions (submissions/<folder>/) in parallel and compare
    Verify(VerifyArgs),
}

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// Print one JSON object instead of one line per check
    #[arg(long)]
    pub json: bool,
    /// Runs of /bin/true in a slot and as a plain fork+exec, interleaved
    #[arg(long, value_name = "N", default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// Parent cgroup the runner owns; the check's slot lives below it
    #[arg(long, value_name = "NAME", default_value = "judge-runner")]
    pub cgroup_parent: String,
    /// The box the check runs in (its uid 60000+N); pick one no daemon uses
    #[arg(long, value_name = "N", default_value_t = 999)]
    pub box_id: u32,
    /// Language table (YAML) whose toolchains are checked [default: the built-in one]
    #[arg(long, value_name = "FILE")]
    pub languages: Option<PathBuf>,
}

/// `--max-entries` / `--max-unpacked`: the unpacking limits shared by `judge`,
/// `package` and `daemon`.
#[derive(Debug, Clone, Copy, Args)]
pub struct UnpackLimitArgs {
    /// Most entries a package archive may hold
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub max_entries: u64,
    /// Most bytes a package may unpack to
    #[arg(long, value_name = "SIZE", default_value = "4G")]
    pub max_unpacked: ByteSize,
}

#[derive(Debug, Clone, Args)]
pub struct SandboxArgs {
    /// CPU-time limit in seconds: all processes and threads of the run together
    #[arg(long, value_name = "SECS")]
    pub time: Option<Seconds>,
    /// Wall-clock limit in seconds [default: 2*time+1 with --time, else 30]
    #[arg(long, value_name = "SECS")]
    pub wall_time: Option<Seconds>,
    /// Memory limit of the whole run (256M, 1G, bytes)
    #[arg(long, value_name = "SIZE", default_value = "512M")]
    pub memory: ByteSize,
    /// Processes + threads alive at once
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub processes: u32,
    /// Largest file the program may write, stdout/stderr included
    #[arg(long, value_name = "SIZE", default_value = "64M")]
    pub output: ByteSize,
    /// Stack rlimit [default: unlimited, bounded by --memory through the cgroup]
    #[arg(long, value_name = "SIZE")]
    pub stack: Option<ByteSize>,
    /// Open file descriptors
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub open_files: u32,
    /// Host dir mounted read-write at /box (the working directory) [default: a fresh temp dir]
    #[arg(long = "box", value_name = "DIR")]
    pub box_dir: Option<PathBuf>,
    /// Which box: uid/gid 60000+N and its own cgroup; concurrent runs use distinct ids
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub box_id: u32,
    /// Size of the /tmp tmpfs (its pages count against --memory)
    #[arg(long, value_name = "SIZE", default_value = "64M")]
    pub tmp_size: ByteSize,
    /// Pin the run to CPU N
    #[arg(long, value_name = "N")]
    pub cpu: Option<u32>,
    /// Extra bind mount HOST:INSIDE[:rw], read-only unless :rw; repeatable
    #[arg(long, value_name = "HOST:INSIDE[:rw]")]
    pub bind: Vec<BindArg>,
    /// Host file for the program's stdin [default: /dev/null]
    #[arg(long, value_name = "FILE")]
    pub stdin: Option<PathBuf>,
    /// Host file for the program's stdout [default: inherited]
    #[arg(long, value_name = "FILE")]
    pub stdout: Option<PathBuf>,
    /// Host file for the program's stderr [default: inherited]
    #[arg(long, value_name = "FILE")]
    pub stderr: Option<PathBuf>,
    /// NAME=VALUE added to the environment; repeatable
    #[arg(long, value_name = "NAME=VALUE")]
    pub env: Vec<EnvArg>,
    /// Seccomp policy (seccompiler JSON) or `none` [default: the built-in seccomp/default.json]
    #[arg(long, value_name = "FILE|none")]
    pub seccomp: Option<String>,
    /// Keep the host's network [default: isolated, loopback only]
    #[arg(long)]
    pub network: bool,
    /// Write the report as one JSON object (`-` = stdout) [default: human summary on stderr]
    #[arg(long, value_name = "FILE")]
    pub report: Option<String>,
    /// Parent cgroup the runner owns; each run gets its own cgroup below it
    #[arg(long, value_name = "NAME", default_value = "judge-runner")]
    pub cgroup_parent: String,
    /// PROGRAM [ARGS...], resolved inside the sandbox
    #[arg(required = true, trailing_var_arg = true, value_name = "PROGRAM")]
    pub command: Vec<String>,
}

/// `HOST:INSIDE[:rw]`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindArg {
    pub host: PathBuf,
    pub inside: PathBuf,
    pub writable: bool,
}

impl FromStr for BindArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (rest, writable) = match s.strip_suffix(":rw") {
            Some(rest) => (rest, true),
            None => (s.strip_suffix(":ro").unwrap_or(s), false),
        };
        let (host, inside) = rest
            .split_once(':')
            .ok_or_else(|| format!("invalid bind {s:?}: expected HOST:INSIDE[:rw]"))?;
        if host.is_empty() || !inside.starts_with('/') {
            return Err(format!(
                "invalid bind {s:?}: HOST must be non-empty and INSIDE an absolute path"
            ));
        }
        Ok(BindArg {
            host: PathBuf::from(host),
            inside: PathBuf::from(inside),
            writable,
        })
    }
}

/// `FROM=TO`: a submission in language FROM is judged as language TO
/// (`python3=pypy3`: Kattis' Python 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LanguageMapArg {
    pub from: String,
    pub to: String,
}

impl FromStr for LanguageMapArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let ok =
            |x: &str| !x.is_empty() && x.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        match s.split_once('=') {
            Some((from, to)) if ok(from) && ok(to) && from != to => Ok(LanguageMapArg {
                from: from.to_string(),
                to: to.to_string(),
            }),
            _ => Err(format!(
                "invalid language mapping {s:?}: expected FROM=TO, two different language ids"
            )),
        }
    }
}

/// Applies `--map-language` to a language id (the first mapping of `id` wins).
pub fn map_language<'a>(maps: &'a [LanguageMapArg], id: &'a str) -> &'a str {
    maps.iter()
        .find(|m| m.from == id)
        .map_or(id, |m| m.to.as_str())
}

/// `NAME=VALUE`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvArg {
    pub name: String,
    pub value: String,
}

impl FromStr for EnvArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split_once('=') {
            Some((name, value))
                if !name.is_empty() && !name.contains('\0') && !value.contains('\0') =>
            {
                Ok(EnvArg {
                    name: name.to_string(),
                    value: value.to_string(),
                })
            }
            _ => Err(format!(
                "invalid environment entry {s:?}: expected NAME=VALUE"
            )),
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct JudgeArgs {
    /// Problem package: a directory or a .tar.gz
    #[arg(long, value_name = "PACKAGE")]
    pub problem: PathBuf,
    /// Language of the submission [default: from the first SOURCE's extension]
    #[arg(long, value_name = "LANG")]
    pub language: Option<String>,
    /// Time limit when the package names none
    #[arg(long, value_name = "SECS")]
    pub time_limit: Option<Seconds>,
    /// Write the report as JSON (`-` = stdout)
    #[arg(long, value_name = "FILE")]
    pub report: Option<String>,
    /// Write the per-test details document (JSON array; `-` = stdout)
    #[arg(long, value_name = "FILE")]
    pub details: Option<PathBuf>,
    /// Write the compiler output (always, empty when the compiler printed nothing; `-` = stdout)
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Language table (YAML, the format of the built-in one; see docs/judge.md) replacing the built-in one
    #[arg(long = "languages", value_name = "FILE")]
    pub language_config: Option<PathBuf>,
    /// Judge a submission in language FROM as language TO (repeatable; `python3=pypy3`: Kattis' Python 3)
    #[arg(long = "map-language", value_name = "FROM=TO")]
    pub map_language: Vec<LanguageMapArg>,
    /// Box id of the submission's runs; its custom validator runs on N+500
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(..=i64::from(crate::judge::MAX_BOX_ID)))]
    pub box_id: u32,
    /// Pin sandboxed runs to CPU N
    #[arg(long, value_name = "N")]
    pub cpu: Option<u32>,
    /// Parent cgroup the judge owns
    #[arg(long, value_name = "NAME", default_value = "judge-runner")]
    pub cgroup_parent: String,
    #[command(flatten)]
    pub unpack: UnpackLimitArgs,
    /// The submission's source files
    #[arg(required = true, value_name = "SOURCE")]
    pub sources: Vec<PathBuf>,
}

#[derive(Debug, Clone, Subcommand)]
pub enum PackageCommand {
    /// Parse a package (directory or .tar.gz) and print what it holds or what is wrong
    Check(PackageCheckArgs),
    /// Bring a package into the cache (download once, SHA-256 checked, unpacked atomically)
    Fetch(PackageFetchArgs),
}

#[derive(Debug, Clone, Args)]
pub struct PackageCheckArgs {
    /// A package directory or .tar.gz
    #[arg(value_name = "PATH")]
    pub path: PathBuf,
    /// Time limit to assume when the package names none
    #[arg(long, value_name = "SECS")]
    pub time_limit: Option<Seconds>,
    #[command(flatten)]
    pub unpack: UnpackLimitArgs,
}

#[derive(Debug, Clone, Args)]
pub struct PackageFetchArgs {
    /// Where the .tar.gz is served
    #[arg(value_name = "URL")]
    pub url: String,
    /// Expected SHA-256 of the .tar.gz bytes (hex)
    #[arg(long, value_name = "HEX")]
    pub sha256: String,
    /// Cache root
    #[arg(long, value_name = "DIR", default_value = "packages-cache")]
    pub cache: PathBuf,
    /// Size budget of the cache (least recently used entries are evicted)
    #[arg(long, value_name = "SIZE", default_value = "10G")]
    pub cache_size: ByteSize,
    /// A Runner key sent as bearer token to URL's origin (a Server's own package URL)
    #[arg(
        long,
        env = "JUDGE_RUNNER_KEY",
        hide_env_values = true,
        value_name = "KEY"
    )]
    pub key: Option<String>,
    #[command(flatten)]
    pub unpack: UnpackLimitArgs,
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// sqlite://FILE (created when missing) or postgres://...
    #[arg(long, value_name = "URL", default_value = "sqlite://judge.db")]
    pub database: String,
    /// Where packages and attachments are stored (may be shared by several servers)
    #[arg(long, value_name = "DIR", default_value = "judge-storage")]
    pub storage: PathBuf,
    /// Lease granted on a claim, in seconds
    #[arg(long, value_name = "SECS", default_value_t = 120)]
    pub lease_seconds: u64,
    /// Deliveries after which a job goes to Failed (deliveries.exhausted)
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub delivery_cap: u32,
    /// Seconds between reaper sweeps
    #[arg(long, value_name = "SECS", default_value = "2")]
    pub reap_interval: Seconds,
    /// Base URL Runners use to reach this Server, for package URLs in claims [default: from the request's Host]
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
    /// Largest JSON body accepted
    #[arg(long, value_name = "SIZE", default_value = "16M")]
    pub max_body: ByteSize,
    /// Largest package or attachment upload accepted
    #[arg(long, value_name = "SIZE", default_value = "1G")]
    pub max_upload: ByteSize,
    /// Database connections this server may hold
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub db_connections: u32,
    /// Languages a submission or trial may name; another is 422 language.unknown
    #[arg(
        long,
        value_name = "LANG,...",
        value_delimiter = ',',
        default_value = crate::server::DEFAULT_LANGUAGES
    )]
    pub languages: Vec<String>,
    /// A submission or trial naming language FROM is stored as TO (repeatable;
    /// `python3=pypy3`: Kattis' Python 3); TO must be in --languages
    #[arg(long = "map-language", value_name = "FROM=TO")]
    pub map_language: Vec<LanguageMapArg>,
    /// Longest `wait_seconds` a claim may wait
    #[arg(long, value_name = "SECS", default_value = "60")]
    pub max_claim_wait: Seconds,
    /// The HMAC-SHA256 key of webhook signatures; without it callback_url is refused
    #[arg(
        long,
        env = "JUDGE_WEBHOOK_SECRET",
        hide_env_values = true,
        value_name = "SECRET"
    )]
    pub webhook_secret: Option<String>,
    /// Accept callback URLs on loopback/private addresses and this Server's own host
    #[arg(long)]
    pub webhook_allow_private: bool,
    /// Time limit of one webhook delivery
    #[arg(long, value_name = "SECS", default_value = "10")]
    pub webhook_timeout: Seconds,
    /// First webhook retry delay (doubled per failure, with jitter, for 24 h)
    #[arg(long, value_name = "SECS", default_value = "2")]
    pub webhook_backoff: Seconds,
    /// How long a delivered or given-up webhook event is kept before it is deleted
    #[arg(long, value_name = "SECS", default_value = "604800")]
    pub webhook_retention: Seconds,
    /// The manager token (every scope)
    #[arg(
        long,
        env = "JUDGE_MANAGER_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub manager_token: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct DaemonArgs {
    /// Base URL of the Server
    #[arg(long, value_name = "URL")]
    pub server: String,
    /// This Runner's key (from POST /api/runners)
    #[arg(
        long,
        env = "JUDGE_RUNNER_KEY",
        hide_env_values = true,
        value_name = "KEY"
    )]
    pub key: String,
    /// Slots evaluating in parallel [default: CPUs - 1, at least 1]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub slots: Option<u32>,
    /// Box id of the first slot; slots use N, N+1, ... (their validators N+500, ...)
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(..=i64::from(crate::judge::MAX_BOX_ID)))]
    pub first_box: u32,
    /// Package cache root, shareable between daemons
    #[arg(long, value_name = "DIR", default_value = "packages-cache")]
    pub cache: PathBuf,
    /// Size budget of the package cache
    #[arg(long, value_name = "SIZE", default_value = "10G")]
    pub cache_size: ByteSize,
    /// Languages to offer (comma-separated) [default: every configured language whose toolchain is present]
    #[arg(long, value_name = "LANGS", value_delimiter = ',')]
    pub languages: Option<Vec<String>>,
    /// Language table (YAML, the format of the built-in one; see docs/judge.md) replacing the built-in one
    #[arg(long, value_name = "FILE")]
    pub language_config: Option<PathBuf>,
    /// Serve Prometheus metrics on this address
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<SocketAddr>,
    /// Parent cgroup the daemon owns
    #[arg(long, value_name = "NAME", default_value = "judge-runner")]
    pub cgroup_parent: String,
    /// On SIGTERM/SIGINT, let running jobs finish for up to SECS before releasing them
    #[arg(long, value_name = "SECS", default_value = "0")]
    pub grace: Seconds,
    #[command(flatten)]
    pub unpack: UnpackLimitArgs,
}

#[derive(Debug, Clone, Args)]
pub struct ForwardArgs {
    /// Base URL of the Server jobs are claimed from (A)
    #[arg(long, value_name = "URL")]
    pub server: String,
    /// This forwarder's Runner key at A (from POST /api/runners)
    #[arg(
        long,
        env = "JUDGE_RUNNER_KEY",
        hide_env_values = true,
        value_name = "KEY"
    )]
    pub key: String,
    /// Base URL of the Server that judges the jobs (B)
    #[arg(long, value_name = "URL")]
    pub to: String,
    /// The forwarder's token at B: the manager token, or one with problems:write, submissions:write, console:read
    #[arg(
        long,
        env = "JUDGE_FORWARD_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub to_token: String,
    /// Jobs held at once (they wait on B, not on a CPU here)
    #[arg(long, value_name = "N", default_value_t = crate::forward::DEFAULT_IN_FLIGHT,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub in_flight: u32,
    /// Receive B's attempt.ended webhooks on this address (polling only without it)
    #[arg(long, value_name = "ADDR")]
    pub callback_listen: Option<SocketAddr>,
    /// The URL B is given for its webhooks [default: http://<callback-listen>/attempt-ended]
    #[arg(long, value_name = "URL", requires = "callback_listen")]
    pub callback_url: Option<String>,
    /// Languages offered to A (comma-separated); B must accept them
    #[arg(
        long,
        value_name = "LANGS",
        value_delimiter = ',',
        default_value = "c,cpp,python3,rust,java"
    )]
    pub languages: Vec<String>,
    /// Serve Prometheus metrics on this address
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<SocketAddr>,
    /// On SIGTERM/SIGINT, let jobs B has accepted finish for up to SECS before releasing them
    #[arg(long, value_name = "SECS", default_value = "0")]
    pub grace: Seconds,
}

#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Slots of the demo's Runner [default: CPUs - 1, at least 1]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub slots: Option<u32>,
    /// Keep the demo's temporary directory (database, storage, cache) and print where it is
    #[arg(long)]
    pub keep: bool,
    /// Example problems to judge [default: the bundled examples/problems]
    #[arg(long, value_name = "DIR")]
    pub problems: Option<PathBuf>,
    /// Judge through a forwarding Runner: a second Server whose daemon judges, and
    /// `judge-runner forward` between it and the Server the submissions go to
    #[arg(long)]
    pub forward: bool,
}

#[derive(Debug, Clone, Args)]
pub struct VerifyArgs {
    /// Problem package: a directory or a .tar.gz
    #[arg(value_name = "PACKAGE")]
    pub package: PathBuf,
    /// Submissions judged side by side, each on its own CPU and box id [default: CPUs - 1, at least 1]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub slots: Option<u32>,
    /// Box id of the first slot (slot i: N+i, its validator N+i+500)
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(..=i64::from(crate::judge::MAX_BOX_ID)))]
    pub first_box: u32,
    /// Time limit when the package names none [default: computed from the accepted submissions]
    #[arg(long, value_name = "SECS")]
    pub time_limit: Option<Seconds>,
    /// Only the submissions whose folder/name matches (`*`, `?`), e.g. 'accepted/*' or '*.py'
    #[arg(long, value_name = "GLOB")]
    pub only: Option<String>,
    /// Write the results as a JSON array (`-` = stdout)
    #[arg(long, value_name = "FILE")]
    pub report: Option<String>,
    /// Language table (YAML, the format of the built-in one) replacing the built-in one
    #[arg(long = "languages", value_name = "FILE")]
    pub language_config: Option<PathBuf>,
    /// Judge the submissions in language FROM as language TO (repeatable; `python3=pypy3`: Kattis' Python 3)
    #[arg(long = "map-language", value_name = "FROM=TO")]
    pub map_language: Vec<LanguageMapArg>,
    /// Parent cgroup the judges own
    #[arg(long, value_name = "NAME", default_value = "judge-runner")]
    pub cgroup_parent: String,
    #[command(flatten)]
    pub unpack: UnpackLimitArgs,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn serve_accepts_by_default_the_contracts_five_languages_of_the_built_in_table() {
        let cli = Cli::try_parse_from(["judge-runner", "serve"]).unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("not serve")
        };
        assert_eq!(args.languages, ["c", "cpp", "python3", "rust", "java"]);
        let table = crate::judge::LanguageTable::builtin().unwrap();
        for language in &args.languages {
            assert!(table.get(language).is_some(), "{language} is not built in");
        }
    }

    #[test]
    fn language_mappings_parse_and_apply() {
        let m: LanguageMapArg = "python3=pypy3".parse().unwrap();
        assert_eq!((m.from.as_str(), m.to.as_str()), ("python3", "pypy3"));
        for bad in ["python3", "=pypy3", "python3=", "a=a", "py thon=x", "a=b=c"] {
            assert!(bad.parse::<LanguageMapArg>().is_err(), "{bad}");
        }
        let maps = [m];
        assert_eq!(map_language(&maps, "python3"), "pypy3");
        assert_eq!(map_language(&maps, "cpp"), "cpp");
        let cli = Cli::try_parse_from([
            "judge-runner",
            "serve",
            "--languages",
            "c,pypy3",
            "--map-language",
            "python3=pypy3",
        ])
        .unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("not serve")
        };
        assert_eq!(args.map_language, maps);
    }

    #[test]
    fn bind_parses() {
        let b: BindArg = "/data:/data:rw".parse().unwrap();
        assert!(b.writable);
        let b: BindArg = "in:/in".parse().unwrap();
        assert_eq!(b.host, PathBuf::from("in"));
        assert!(!b.writable);
        assert!("nope".parse::<BindArg>().is_err());
        assert!("/a:rel".parse::<BindArg>().is_err());
    }

    #[test]
    fn env_parses() {
        let e: EnvArg = "A=b=c".parse().unwrap();
        assert_eq!((e.name.as_str(), e.value.as_str()), ("A", "b=c"));
        assert!("=x".parse::<EnvArg>().is_err());
        assert!("x".parse::<EnvArg>().is_err());
    }

    #[test]
    fn sandbox_takes_program_after_double_dash() {
        let cli = Cli::try_parse_from([
            "judge-runner",
            "sandbox",
            "--time",
            "1",
            "--",
            "/bin/echo",
            "-n",
            "hi",
        ])
        .unwrap();
        let Command::Sandbox(args) = cli.command else {
            panic!("not sandbox")
        };
        assert_eq!(args.command, ["/bin/echo", "-n", "hi"]);
        assert_eq!(args.memory, ByteSize(512 << 20));
    }
}
