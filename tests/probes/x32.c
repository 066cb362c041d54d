// Calls getpid and getppid through the x32 ABI (syscall number | 0x40000000) and
// natively. Prints "name errno" lines (0 = the call succeeded). On a kernel built
// with CONFIG_X86_X32_ABI an unfiltered x32 getpid succeeds.
#include <errno.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#define X32 0x40000000L

static void report(const char *name, long rc) {
    printf("%s %d\n", name, rc < 0 ? errno : 0);
    fflush(stdout);
}

int main(void) {
    report("getpid", syscall(SYS_getpid));
    report("x32_getpid", syscall(X32 | SYS_getpid));
    report("x32_getppid", syscall(X32 | SYS_getppid));
    return 0;
}
