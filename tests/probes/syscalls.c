// Calls each syscall the default seccomp policy refuses, with arguments chosen so
// that, *without* the filter, the kernel answers something other than EPERM where
// it can (a bad pointer, a bad flag, a harmless query). Prints "name errno" lines
// (0 = the call succeeded). Nothing here can do harm as the box user without
// capabilities, filter or not.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/timex.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void report(const char *name, long rc) {
    printf("%s %d\n", name, rc < 0 ? errno : 0);
    fflush(stdout);
}

// clone-like calls that may succeed: the child exits at once.
static void fork_like(const char *name, long rc) {
    if (rc == 0) _exit(0);
    if (rc > 0) waitpid((pid_t)rc, NULL, __WALL);
    report(name, rc);
}

int main(void) {
    char buf[16] = "abc", dst[16];
    struct iovec local = {dst, 4}, remote = {buf, 4};
    pid_t me = getpid();
    // PTRACE_TRACEME in a child of our own, so the probe itself is never traced.
    pid_t c = fork();
    if (c == 0) _exit(syscall(SYS_ptrace, 0 /*TRACEME*/, 0L, 0L, 0L) < 0 ? errno : 0);
    int st = 0;
    waitpid(c, &st, 0);
    errno = WEXITSTATUS(st);
    report("ptrace", errno ? -1 : 0);
    report("process_vm_readv", syscall(SYS_process_vm_readv, me, &local, 1, &remote, 1, 0));
    report("process_vm_writev", syscall(SYS_process_vm_writev, me, &remote, 1, &local, 1, 0));
    int pidfd = (int)syscall(SYS_pidfd_open, me, 0);
    report("pidfd_getfd", syscall(SYS_pidfd_getfd, pidfd, 0, 0));
    report("process_madvise", syscall(SYS_process_madvise, pidfd, NULL, 0, 0, 1));
    report("kcmp", syscall(SYS_kcmp, me, me, 0 /*KCMP_FILE*/, 0, 0));
    report("mount", syscall(SYS_mount, "x", "/tmp", (char *)1, 0, NULL));
    report("umount2", syscall(SYS_umount2, "/tmp", 0x100));
    report("pivot_root", syscall(SYS_pivot_root, "/tmp", "/tmp"));
    report("chroot", syscall(SYS_chroot, "/nonexistent-dir"));
    report("fsopen", syscall(SYS_fsopen, "tmpfs", 0));
    report("fsconfig", syscall(SYS_fsconfig, -1, 99, NULL, NULL, 0));
    report("fsmount", syscall(SYS_fsmount, -1, 0, 0));
    report("fspick", syscall(SYS_fspick, AT_FDCWD, "/", 0));
    report("move_mount", syscall(SYS_move_mount, -1, "", -1, "", 0));
    report("open_tree", syscall(SYS_open_tree, AT_FDCWD, "/", 0));
    report("mount_setattr", syscall(SYS_mount_setattr, -1, "", 0, NULL, 0));
    report("unshare", syscall(SYS_unshare, 0x1 /* not a valid flag */));
    report("setns", syscall(SYS_setns, -1, 0));
    report("keyctl", syscall(SYS_keyctl, 0 /*GET_KEYRING_ID*/, -2 /*PROCESS*/, 0));
    report("add_key", syscall(SYS_add_key, "user", "probe", "v", 1, -2));
    report("request_key", syscall(SYS_request_key, "user", "no-such-key", NULL, -2));
    report("bpf", syscall(SYS_bpf, 5 /*PROG_LOAD*/, NULL, 0));
    char attr[128] = {0};
    report("perf_event_open", syscall(SYS_perf_event_open, attr, 0, -1, -1, 0));
    report("userfaultfd", syscall(SYS_userfaultfd, 1 /*USER_MODE_ONLY*/ | O_CLOEXEC));
    char params[120] = {0};
    report("io_uring_setup", syscall(SYS_io_uring_setup, 1, params));
    report("io_uring_enter", syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0));
    report("io_uring_register", syscall(SYS_io_uring_register, -1, 0, NULL, 0));
    report("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0));
    report("kexec_file_load", syscall(SYS_kexec_file_load, -1, -1, 0, NULL, 0));
    report("init_module", syscall(SYS_init_module, NULL, 0, ""));
    report("finit_module", syscall(SYS_finit_module, -1, "", 0));
    report("delete_module", syscall(SYS_delete_module, "no_such_module", 0));
    report("reboot", syscall(SYS_reboot, 0, 0, 0, NULL));
    report("swapon", syscall(SYS_swapon, "/nonexistent", 0));
    report("swapoff", syscall(SYS_swapoff, "/nonexistent"));
    report("acct", syscall(SYS_acct, NULL));
    report("quotactl", syscall(SYS_quotactl, 99, "/", 0, NULL));
    report("open_by_handle_at", syscall(SYS_open_by_handle_at, AT_FDCWD, NULL, 0));
    char fh[64] = {0};
    int mnt;
    report("name_to_handle_at", syscall(SYS_name_to_handle_at, AT_FDCWD, "/", fh, &mnt, 0));
#ifdef SYS_iopl
    report("iopl", syscall(SYS_iopl, 0));
    report("ioperm", syscall(SYS_ioperm, 0, 1, 0));
#endif
    report("syslog", syscall(SYS_syslog, 10 /*SIZE_BUFFER*/, NULL, 0));
    report("clock_settime", syscall(SYS_clock_settime, CLOCK_REALTIME, NULL));
    report("clock_adjtime", syscall(SYS_clock_adjtime, CLOCK_REALTIME, NULL));
    report("settimeofday", syscall(SYS_settimeofday, NULL, NULL));
    struct timex tx;
    memset(&tx, 0, sizeof tx);
    report("adjtimex", syscall(SYS_adjtimex, &tx));
    report("vhangup", syscall(SYS_vhangup));
    report("fanotify_init", syscall(SYS_fanotify_init, 0x200 /*REPORT_FID*/, O_RDONLY));
    static const struct { const char *name; unsigned long flag; } ns[] = {
        {"clone_newns", CLONE_NEWNS}, {"clone_newcgroup", CLONE_NEWCGROUP},
        {"clone_newuts", CLONE_NEWUTS}, {"clone_newipc", CLONE_NEWIPC},
        {"clone_newuser", CLONE_NEWUSER}, {"clone_newpid", CLONE_NEWPID},
        {"clone_newnet", CLONE_NEWNET},
    };
    for (unsigned i = 0; i < sizeof ns / sizeof ns[0]; i++)
        fork_like(ns[i].name, syscall(SYS_clone, (long)(ns[i].flag | SIGCHLD), 0L, 0L, 0L, 0L));
    fork_like("clone_plain", syscall(SYS_clone, (long)SIGCHLD, 0L, 0L, 0L, 0L));
    struct clone_args ca;
    memset(&ca, 0, sizeof ca);
    ca.exit_signal = SIGCHLD;
    fork_like("clone3", syscall(SYS_clone3, &ca, sizeof ca));
    return 0;
}
