// daemon MARKER: double fork + setsid; the grandchild keeps this program's
// argv (so the host finds MARKER in its cmdline) and lives on, ignoring SIGHUP;
// the parent exits after 100 ms.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    pid_t p = fork();
    if (p == 0) {
        setsid();
        if (fork() == 0) {
            signal(SIGHUP, SIG_IGN);
            for (;;) pause();
        }
        _exit(0);
    }
    waitpid(p, NULL, 0);
    usleep(100000);
    return 0;
}
