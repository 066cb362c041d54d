//! The report pipe: what a run's init (and a slot's root builder) tells the
//! supervisor, as fixed-size records, and the child steps a failure names. One
//! encoder and one decoder, used by both sides; the child side encodes into a
//! stack buffer (no allocation: it runs between clone and execve).

/// The child steps, each with the words the supervisor's message uses: one list
/// gives the enum, its number on the pipe and its name.
macro_rules! steps {
    ($first:ident => $first_name:literal, $($step:ident => $name:literal,)*) => {
        /// Where a child step failed; the supervisor turns it into a message.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[repr(u32)]
        pub(crate) enum Step {
            $first = 1,
            $($step,)*
        }

        impl Step {
            /// Every step, in the order of their numbers.
            pub(crate) const ALL: &[Step] = &[Step::$first, $(Step::$step,)*];

            pub(crate) fn name(self) -> &'static str {
                match self {
                    Step::$first => $first_name,
                    $(Step::$step => $name,)*
                }
            }
        }
    };
}

steps! {
    DeathSignal => "set the parent-death signal",
    MakePrivate => "make the mount tree private",
    Mount => "build the root",
    PivotRoot => "pivot_root into the new root",
    Loopback => "bring up the loopback device",
    JoinNetwork => "join the slot's network namespace",
    Hostname => "set the hostname",
    Fork => "fork the program",
    JoinCgroup => "join the run's cgroup",
    Stdio => "connect stdin/stdout/stderr",
    CloseFds => "close inherited descriptors",
    Rlimit => "set rlimits",
    Chdir => "chdir to /box",
    Groups => "drop supplementary groups",
    Gid => "set the box gid",
    BoundingSet => "drop the capability bounding set",
    Ambient => "clear ambient capabilities",
    Uid => "set the box uid",
    Capabilities => "clear the capability sets",
    NoNewPrivs => "set no_new_privs",
    Seccomp => "install the seccomp filter",
    Exec => "execute the program",
    Reap => "wait for the program",
    JoinRoot => "join the slot's prepared root",
    OomScore => "raise the OOM score",
    MemoryLimit => "set the run's memory limit",
}

impl Step {
    pub(crate) fn from_u32(v: u32) -> Option<Step> {
        Step::ALL.iter().copied().find(|s| *s as u32 == v)
    }
}

/// One record on the report pipe: `[kind, a, b, c]` as four native-endian u32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Record {
    /// The program ended: its wait status and `ru_maxrss` in KiB. init's last word.
    Exited { status: i32, max_rss_kib: u32 },
    /// A step failed with `errno`; `aux` says more for some steps (which mount
    /// operation, which capability). `step` is a [`Step`]'s number.
    Failed { step: u32, errno: u32, aux: u32 },
    /// When the program ended (CLOCK_MONOTONIC ns), just before its `Exited`: the
    /// wall time is the program's, not the handoffs'.
    Time { ns: u64 },
    /// Memory charged to the cgroup just before the program's execve, when it set
    /// its limit over it (its peak's baseline).
    Base { bytes: u64 },
}

const EXITED: u32 = 1;
const FAILED: u32 = 2;
const TIME: u32 = 3;
const BASE: u32 = 4;

impl Record {
    /// Bytes of one record.
    pub(crate) const LEN: usize = 16;

    /// A failure of `step`.
    pub(crate) fn failed(step: Step, errno: i32, aux: u32) -> Record {
        Record::Failed {
            step: step as u32,
            errno: errno.unsigned_abs(),
            aux,
        }
    }

    pub(crate) fn encode(self) -> [u8; Record::LEN] {
        let split = |v: u64| {
            (
                u32::try_from(v & 0xffff_ffff).unwrap_or(0),
                u32::try_from(v >> 32).unwrap_or(0),
            )
        };
        let words = match self {
            Record::Exited {
                status,
                max_rss_kib,
            } => [EXITED, 0, status.cast_unsigned(), max_rss_kib],
            Record::Failed { step, errno, aux } => [FAILED, step, errno, aux],
            Record::Time { ns } => {
                let (low, high) = split(ns);
                [TIME, low, high, 0]
            }
            Record::Base { bytes } => {
                let (low, high) = split(bytes);
                [BASE, low, high, 0]
            }
        };
        let mut out = [0u8; Record::LEN];
        for (dst, word) in out.chunks_exact_mut(4).zip(words) {
            dst.copy_from_slice(&word.to_ne_bytes());
        }
        out
    }

    /// The record in `bytes`; `None` for an unknown kind.
    pub(crate) fn decode(bytes: &[u8; Record::LEN]) -> Option<Record> {
        let mut words = [0u32; 4];
        for (word, src) in words.iter_mut().zip(bytes.chunks_exact(4)) {
            *word = u32::from_ne_bytes([src[0], src[1], src[2], src[3]]);
        }
        let joined = u64::from(words[1]) | (u64::from(words[2]) << 32);
        match words {
            [EXITED, _, status, max_rss_kib] => Some(Record::Exited {
                status: status.cast_signed(),
                max_rss_kib,
            }),
            [FAILED, step, errno, aux] => Some(Record::Failed { step, errno, aux }),
            [TIME, ..] => Some(Record::Time { ns: joined }),
            [BASE, ..] => Some(Record::Base { bytes: joined }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_record_round_trips() {
        for record in [
            Record::Exited {
                status: -2,
                max_rss_kib: 123_456,
            },
            Record::failed(Step::MemoryLimit, libc::ENOMEM, 7),
            Record::Time {
                ns: 0x1234_5678_9abc_def0,
            },
            Record::Base { bytes: 5 << 33 },
        ] {
            assert_eq!(Record::decode(&record.encode()), Some(record));
        }
        assert_eq!(Record::decode(&[0xff; Record::LEN]), None);
    }

    #[test]
    fn every_step_has_its_number_and_a_name() {
        for (i, step) in Step::ALL.iter().enumerate() {
            assert_eq!(*step as usize, i + 1);
            assert_eq!(Step::from_u32(*step as u32), Some(*step));
            assert!(!step.name().is_empty());
        }
        assert_eq!(Step::from_u32(0), None);
        let past = Step::ALL.iter().map(|s| *s as u32).max().unwrap_or(0) + 1;
        assert_eq!(Step::from_u32(past), None);
    }
}
