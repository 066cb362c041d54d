//! What one run needs, as bytes for the slot's launcher (another process, so no
//! pointers): a plain length-prefixed encoding of everything `ChildSpec` holds.
//! Descriptors travel beside the bytes (SCM_RIGHTS); the bytes name them by
//! their index in that list.

use std::cell::Cell;
use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use seccompiler::{BpfProgram, sock_filter};

use crate::sandbox::cgroup::MemoryFds;
use crate::sandbox::child::{ChildSpec, StartPath};
use crate::sandbox::mount::{MountPlan, Op};
use crate::sandbox::net::Net;
use crate::sandbox::sys;

/// Bumped when the encoding changes (the launcher is the same binary, but a
/// daemon upgraded in place could exec a newer one).
pub(crate) const VERSION: u32 = 1;
/// Descriptors one run may send (SCM_RIGHTS carries at most 253).
pub(crate) const MAX_FDS: usize = 240;

/// Bytes and the descriptors they refer to.
#[derive(Default)]
pub(crate) struct Writer {
    pub bytes: Vec<u8>,
    pub fds: Vec<RawFd>,
}

impl Writer {
    fn u8(&mut self, v: u8) {
        self.bytes.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    fn len(&mut self, n: usize) {
        self.u32(u32::try_from(n).unwrap_or(u32::MAX));
    }
    fn bytes(&mut self, b: &[u8]) {
        self.len(b.len());
        self.bytes.extend_from_slice(b);
    }
    fn cstr(&mut self, s: &CStr) {
        self.bytes(s.to_bytes());
    }
    fn cstrs(&mut self, list: &[CString]) {
        self.len(list.len());
        for s in list {
            self.cstr(s);
        }
    }
    fn fd(&mut self, fd: RawFd) {
        let index = self.fds.iter().position(|f| *f == fd).unwrap_or_else(|| {
            self.fds.push(fd);
            self.fds.len() - 1
        });
        self.len(index);
    }
    fn opt_fd(&mut self, fd: Option<RawFd>) {
        match fd {
            Some(fd) => {
                self.u8(1);
                self.fd(fd);
            }
            None => self.u8(0),
        }
    }
}

/// Reads what a `Writer` wrote; `None` on anything malformed.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    fds: &'a [OwnedFd],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8], fds: &'a [OwnedFd]) -> Self {
        Reader { buf, fds }
    }
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.buf.split_at_checked(n)?;
        self.buf = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1)?.first().copied()
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn len(&mut self) -> Option<usize> {
        usize::try_from(self.u32()?).ok()
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.len()?;
        self.take(n)
    }
    fn cstring(&mut self) -> Option<CString> {
        CString::new(self.bytes()?).ok()
    }
    fn cstrings(&mut self) -> Option<Vec<CString>> {
        let n = self.len()?;
        (0..n).map(|_| self.cstring()).collect()
    }
    fn fd(&mut self) -> Option<RawFd> {
        let i = self.len()?;
        Some(self.fds.get(i)?.as_raw_fd())
    }
    fn opt_fd(&mut self) -> Option<Option<RawFd>> {
        match self.u8()? {
            0 => Some(None),
            _ => self.fd().map(Some),
        }
    }
}

/// What the supervisor sends for one run, besides the descriptors.
pub(crate) struct Encode<'a> {
    pub clone_flags: u64,
    /// The slot's prepared root (a mount namespace) to take a private copy of.
    pub template: RawFd,
    /// v2: the run cgroup to clone init into.
    pub cgroup: Option<RawFd>,
    /// The slot's network namespace, or `None` for the host's (`--network`).
    pub netns: Option<RawFd>,
    pub child: &'a ChildSpec<'a>,
    /// What `child.argv` and `child.envp` point into.
    pub argv: &'a [CString],
    pub envp: &'a [CString],
}

pub(crate) fn encode(e: &Encode<'_>) -> Writer {
    let mut w = Writer::default();
    let c = e.child;
    w.u32(VERSION);
    w.u64(e.clone_flags);
    w.fd(e.template);
    w.opt_fd(e.cgroup);
    w.opt_fd(e.netns);
    w.cstr(c.mounts.root());
    w.len(c.mounts.ops().len());
    for op in c.mounts.ops() {
        encode_op(&mut w, op);
    }
    for s in c.stdio {
        w.opt_fd(s);
    }
    w.fd(c.report_fd);
    w.u32(c.uid);
    w.u32(c.last_cap);
    w.len(c.rlimits.len());
    for (res, soft, hard) in &c.rlimits {
        w.u32(*res);
        w.u64(*soft);
        w.u64(*hard);
    }
    w.len(c.filters.len());
    for f in c.filters {
        w.len(f.len());
        for i in f {
            w.u32(u32::from(i.code));
            w.u8(i.jt);
            w.u8(i.jf);
            w.u32(i.k);
        }
    }
    w.cstrs(&c.exec_paths);
    w.cstrs(e.argv);
    w.cstrs(e.envp);
    w.u64(c.memory_bytes);
    match &c.memory {
        Some(m) => {
            w.u8(1);
            w.fd(m.usage);
            w.fd(m.limit);
            w.opt_fd(m.swap_limit);
            w.opt_fd(m.peak_reset);
        }
        None => w.u8(0),
    }
    w
}

fn encode_op(w: &mut Writer, op: &Op) {
    match op {
        Op::Tmpfs {
            target,
            flags,
            data,
        } => {
            w.u8(0);
            w.cstr(target);
            w.u64(*flags);
            w.cstr(data);
        }
        Op::Bind {
            source,
            target,
            file,
            flags,
        } => {
            w.u8(1);
            w.cstr(source);
            w.cstr(target);
            w.u8(u8::from(*file));
            w.u64(*flags);
        }
        Op::Mkdir { path } => {
            w.u8(2);
            w.cstr(path);
        }
        Op::Symlink { target, link } => {
            w.u8(3);
            w.cstr(target);
            w.cstr(link);
        }
        Op::File { path, contents } => {
            w.u8(4);
            w.cstr(path);
            w.bytes(contents);
        }
        Op::Proc { target } => {
            w.u8(5);
            w.cstr(target);
        }
        Op::Remount { target, flags } => {
            w.u8(6);
            w.cstr(target);
            w.u64(*flags);
        }
        Op::Attach {
            tree,
            target,
            file,
            flags,
        } => {
            w.u8(7);
            w.fd(*tree);
            w.cstr(target);
            w.u8(u8::from(*file));
            w.u64(*flags);
        }
    }
}

fn decode_op(r: &mut Reader<'_>) -> Option<Op> {
    Some(match r.u8()? {
        0 => Op::Tmpfs {
            target: r.cstring()?,
            flags: r.u64()?,
            data: r.cstring()?,
        },
        1 => Op::Bind {
            source: r.cstring()?,
            target: r.cstring()?,
            file: r.u8()? != 0,
            flags: r.u64()?,
        },
        2 => Op::Mkdir { path: r.cstring()? },
        3 => Op::Symlink {
            target: r.cstring()?,
            link: r.cstring()?,
        },
        4 => Op::File {
            path: r.cstring()?,
            contents: r.bytes()?.to_vec(),
        },
        5 => Op::Proc {
            target: r.cstring()?,
        },
        6 => Op::Remount {
            target: r.cstring()?,
            flags: r.u64()?,
        },
        7 => Op::Attach {
            tree: r.fd()?,
            target: r.cstring()?,
            file: r.u8()? != 0,
            flags: r.u64()?,
        },
        _ => return None,
    })
}

/// A run as the launcher received it; the descriptors stay owned by the caller.
pub(crate) struct Decoded {
    pub clone_flags: u64,
    pub template: RawFd,
    pub cgroup: Option<RawFd>,
    pub netns: Option<RawFd>,
    mounts: MountPlan,
    stdio: [Option<RawFd>; 3],
    report_fd: RawFd,
    uid: u32,
    last_cap: u32,
    rlimits: Vec<(libc::__rlimit_resource_t, u64, u64)>,
    filters: Vec<BpfProgram>,
    exec_paths: Vec<CString>,
    argv: Vec<CString>,
    envp: Vec<CString>,
    memory_bytes: u64,
    memory: Option<MemoryFds>,
    /// Where the program starts (vfork-like) in init's copy of this memory.
    program_stack: Vec<u8>,
}

impl Decoded {
    pub(crate) fn decode(r: &mut Reader<'_>) -> Option<Decoded> {
        if r.u32()? != VERSION {
            return None;
        }
        let (clone_flags, template, cgroup, netns) = (r.u64()?, r.fd()?, r.opt_fd()?, r.opt_fd()?);
        let root = r.cstring()?;
        let n = r.len()?;
        let ops = (0..n).map(|_| decode_op(r)).collect::<Option<Vec<_>>>()?;
        let stdio = [r.opt_fd()?, r.opt_fd()?, r.opt_fd()?];
        let (report_fd, uid, last_cap) = (r.fd()?, r.u32()?, r.u32()?);
        let n = r.len()?;
        let rlimits = (0..n)
            .map(|_| Some((r.u32()?, r.u64()?, r.u64()?)))
            .collect::<Option<Vec<_>>>()?;
        let n = r.len()?;
        let filters = (0..n)
            .map(|_| decode_filter(r))
            .collect::<Option<Vec<_>>>()?;
        Some(Decoded {
            clone_flags,
            template,
            cgroup,
            netns,
            mounts: MountPlan::from_ops(root, ops),
            stdio,
            report_fd,
            uid,
            last_cap,
            rlimits,
            filters,
            exec_paths: r.cstrings()?,
            argv: r.cstrings()?,
            envp: r.cstrings()?,
            memory_bytes: r.u64()?,
            memory: decode_memory(r)?,
            program_stack: vec![0u8; crate::sandbox::child::PROGRAM_STACK],
        })
    }

    /// The child's view of this run (pointers into `self`), started by a
    /// launcher that is `clean` (see [`StartPath::Launched`]).
    pub(crate) fn child_spec(&mut self, clean: bool) -> ChildSpec<'_> {
        let program_stack = Cell::new(sys::VforkStack::new(&mut self.program_stack));
        ChildSpec {
            start: StartPath::Launched { clean },
            mounts: &self.mounts,
            net: self.netns.map_or(Net::Host, Net::Join),
            stdio: self.stdio,
            rlimits: self.rlimits.clone(),
            uid: self.uid,
            last_cap: self.last_cap,
            filters: &self.filters,
            exec_paths: self.exec_paths.clone(),
            argv: sys::CStrArray::new(&self.argv),
            envp: sys::CStrArray::new(&self.envp),
            report_fd: self.report_fd,
            program_stack,
            memory: self.memory,
            memory_bytes: self.memory_bytes,
        }
    }
}

fn decode_memory(r: &mut Reader<'_>) -> Option<Option<MemoryFds>> {
    if r.u8()? == 0 {
        return Some(None);
    }
    Some(Some(MemoryFds {
        usage: r.fd()?,
        limit: r.fd()?,
        swap_limit: r.opt_fd()?,
        peak_reset: r.opt_fd()?,
    }))
}

fn decode_filter(r: &mut Reader<'_>) -> Option<BpfProgram> {
    let n = r.len()?;
    (0..n)
        .map(|_| {
            Some(sock_filter {
                code: u16::try_from(r.u32()?).ok()?,
                jt: r.u8()?,
                jf: r.u8()?,
                k: r.u32()?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Every field the launcher needs comes out as it went in. The spec is
    /// destructured without `..`, so a field added to `ChildSpec` does not
    /// compile here until this test covers it.
    #[test]
    fn a_run_round_trips_field_by_field() {
        let fds: Vec<OwnedFd> = (0..12)
            .map(|_| OwnedFd::from(std::fs::File::open("/dev/null").unwrap()))
            .collect();
        let fd = |i: usize| fds[i].as_raw_fd();
        let c = |s: &str| CString::new(s).unwrap();
        let ops = vec![
            Op::Tmpfs {
                target: c("/r"),
                flags: 1,
                data: c("size=1m"),
            },
            Op::Bind {
                source: c("/usr"),
                target: c("/r/usr"),
                file: false,
                flags: 2,
            },
            Op::Mkdir { path: c("/r/box") },
            Op::Symlink {
                target: c("usr/lib"),
                link: c("/r/lib"),
            },
            Op::File {
                path: c("/r/etc/hosts"),
                contents: b"127.0.0.1 box\n".to_vec(),
            },
            Op::Proc {
                target: c("/r/proc"),
            },
            Op::Remount {
                target: c("/r"),
                flags: 3,
            },
            Op::Attach {
                tree: fd(0),
                target: c("/r/data"),
                file: true,
                flags: 4,
            },
        ];
        let mounts = MountPlan::from_ops(c("/r"), ops);
        let filters = vec![
            vec![sock_filter {
                code: 0x15,
                jt: 1,
                jf: 2,
                k: 0xdead_beef,
            }],
            Vec::new(),
        ];
        let argv = vec![c("prog"), c("arg")];
        let envp = vec![c("PATH=/usr/bin")];
        let memory = MemoryFds {
            usage: fd(1),
            limit: fd(2),
            swap_limit: Some(fd(3)),
            peak_reset: None,
        };
        let sent = ChildSpec {
            start: StartPath::Launched { clean: true },
            mounts: &mounts,
            net: Net::Join(fd(4)),
            stdio: [Some(fd(5)), None, Some(fd(6))],
            rlimits: vec![(libc::RLIMIT_FSIZE, 10, 20), (libc::RLIMIT_STACK, 30, 40)],
            uid: 60_007,
            last_cap: 40,
            filters: &filters,
            exec_paths: vec![c("/usr/bin/prog"), c("/bin/prog")],
            argv: sys::CStrArray::new(&argv),
            envp: sys::CStrArray::new(&envp),
            report_fd: fd(7),
            program_stack: Cell::new(None),
            memory: Some(memory),
            memory_bytes: 256 << 20,
        };
        let w = encode(&Encode {
            clone_flags: 0x2000_0000,
            template: fd(8),
            cgroup: Some(fd(9)),
            netns: Some(fd(4)),
            child: &sent,
            argv: &argv,
            envp: &envp,
        });
        // The kernel hands the launcher its own copies, in the order sent.
        let received: Vec<OwnedFd> = w
            .fds
            .iter()
            .map(|raw| {
                fds.iter()
                    .find(|f| f.as_raw_fd() == *raw)
                    .unwrap()
                    .try_clone()
                    .unwrap()
            })
            .collect();
        let same = |sent: RawFd, got: RawFd| {
            let i = w.fds.iter().position(|f| *f == sent).unwrap();
            assert_eq!(
                received[i].as_raw_fd(),
                got,
                "descriptor {sent} arrives as its copy"
            );
        };
        let mut decoded = Decoded::decode(&mut Reader::new(&w.bytes, &received)).unwrap();
        assert_eq!(decoded.clone_flags, 0x2000_0000);
        same(fd(8), decoded.template);
        same(fd(9), decoded.cgroup.unwrap());
        same(fd(4), decoded.netns.unwrap());
        assert_eq!(decoded.argv, argv);
        assert_eq!(decoded.envp, envp);
        let back = |got: RawFd| {
            received
                .iter()
                .position(|f| f.as_raw_fd() == got)
                .map(|i| w.fds[i])
        };
        let ChildSpec {
            start,
            mounts: got_mounts,
            net,
            stdio,
            rlimits,
            uid,
            last_cap,
            filters: got_filters,
            exec_paths,
            argv: _,
            envp: _,
            report_fd,
            program_stack,
            memory: got_memory,
            memory_bytes,
        } = decoded.child_spec(true);
        assert_eq!(start, sent.start);
        assert_eq!(got_mounts.root(), mounts.root());
        assert_eq!(got_mounts.ops().len(), mounts.ops().len());
        for (got, op) in got_mounts.ops().iter().zip(mounts.ops()) {
            match got {
                Op::Attach {
                    tree,
                    target,
                    file,
                    flags,
                } => {
                    let as_sent = Op::Attach {
                        tree: back(*tree).unwrap(),
                        target: target.clone(),
                        file: *file,
                        flags: *flags,
                    };
                    assert_eq!(&as_sent, op);
                }
                got => assert_eq!(got, op),
            }
        }
        assert!(
            matches!(net, Net::Join(netns) if back(netns) == Some(fd(4))),
            "{net:?}"
        );
        assert_eq!(stdio.map(|s| s.and_then(back)), sent.stdio);
        assert_eq!(rlimits, sent.rlimits);
        assert_eq!((uid, last_cap), (sent.uid, sent.last_cap));
        assert_eq!(got_filters, &filters[..]);
        assert_eq!(exec_paths, sent.exec_paths);
        assert_eq!(back(report_fd), Some(sent.report_fd));
        assert!(program_stack.take().is_some(), "a stack for the program");
        let got_memory = got_memory.unwrap();
        assert_eq!(
            MemoryFds {
                usage: back(got_memory.usage).unwrap(),
                limit: back(got_memory.limit).unwrap(),
                swap_limit: got_memory.swap_limit.and_then(back),
                peak_reset: got_memory.peak_reset.and_then(back),
            },
            memory
        );
        assert_eq!(memory_bytes, sent.memory_bytes);
    }

    #[test]
    fn reader_refuses_truncated_input() {
        let mut w = Writer::default();
        w.u32(7);
        w.bytes(b"abc");
        let fds: Vec<OwnedFd> = Vec::new();
        let mut r = Reader::new(&w.bytes, &fds);
        assert_eq!(r.u32(), Some(7));
        assert_eq!(r.bytes(), Some(&b"abc"[..]));
        assert_eq!(r.u8(), None);
        let cut = &w.bytes[..w.bytes.len() - 1];
        let mut r = Reader::new(cut, &fds);
        assert_eq!(r.u32(), Some(7));
        assert_eq!(r.bytes(), None);
        // A descriptor index past the list is refused, not resolved.
        let mut w = Writer::default();
        w.len(3);
        let mut r = Reader::new(&w.bytes, &fds);
        assert_eq!(r.fd(), None);
    }
}
