// daemon MARKER: double fork + setsid; the grandchild execs `sleep 1000 MARKER`-like
// (it renames itself via argv so the host can find it) and lives on; the parent
// exits at once.
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
            signal(1, SIG_IGN);
            char *args[] = {"/bin/sleep", "1000", argc > 1 ? argv[1] : "marker", NULL};
            // busybox and coreutils sleep both accept several operands
            execv(args[0], args);
            for (;;) pause();
        }
        _exit(0);
    }
    waitpid(p, NULL, 0);
    usleep(100000);
    return 0;
}
