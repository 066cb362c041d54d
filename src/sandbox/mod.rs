//! One program, one run: fresh namespaces, its own cgroup, a per-box uid, no
//! capabilities, seccomp, rlimits; a report of what the program did.
//! Knows nothing of packages, jobs or HTTP; imports no other module of ours.
