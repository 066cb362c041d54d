// forker N: fork up to N children that sleep; print how many forks succeeded and
// the errno of the first failure (0 if none), then exit 0 (the run goes on).
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int want = argc > 1 ? atoi(argv[1]) : 1000, made = 0, err = 0;
    for (int i = 0; i < want; i++) {
        pid_t p = fork();
        if (p == 0) { pause(); _exit(0); }
        if (p < 0) { err = errno; break; }
        made++;
    }
    printf("forked %d errno %d\n", made, err);
    return 0;
}
