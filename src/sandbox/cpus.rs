//! Which CPUs slots are pinned to: the daemon's and `verify`'s rule, one place
//! (`judge` re-exports it for `verify`, which does not import the sandbox).

/// The CPUs this process may run on (its affinity mask), lowest first; never
/// empty.
pub fn usable_cpus() -> Vec<u32> {
    let Ok(set) = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)) else {
        return vec![0];
    };
    let cpus: Vec<u32> = (0..nix::sched::CpuSet::count())
        .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
        .filter_map(|cpu| u32::try_from(cpu).ok())
        .collect();
    if cpus.is_empty() { vec![0] } else { cpus }
}

/// The CPU of each of `slots` slots (`None` each when not pinning). With fewer
/// slots than CPUs, slots take the highest CPUs and leave the lowest to the
/// daemon, the Server and interrupts; with more, they share round-robin.
pub fn plan_cpus(slots: usize, pin: bool) -> Vec<Option<u32>> {
    if !pin {
        return vec![None; slots];
    }
    let cpus = usable_cpus();
    let skip = cpus.len().saturating_sub(slots);
    (0..slots)
        .map(|i| Some(cpus[(skip + i) % cpus.len()]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_get_distinct_cpus_from_the_top() {
        let cpus = usable_cpus();
        assert!(!cpus.is_empty());
        let plan = plan_cpus(cpus.len().saturating_sub(1).max(1), true);
        let mut seen: Vec<u32> = plan.iter().map(|c| c.unwrap()).collect();
        assert!(seen.iter().all(|c| cpus.contains(c)));
        let n = seen.len();
        seen.dedup();
        assert_eq!(seen.len(), n, "a CPU given twice: {plan:?}");
        if cpus.len() > 1 {
            assert!(
                !plan.contains(&Some(cpus[0])),
                "the lowest CPU is left free"
            );
        }
        assert_eq!(plan_cpus(3, false), vec![None, None, None]);
        assert_eq!(plan_cpus(cpus.len() + 2, true).len(), cpus.len() + 2);
    }
}
