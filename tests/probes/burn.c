// burn MODE MS [report]: burn CPU for MS ms of this thread's CPU time in two
// threads ("threads") or in a parent and a forked child ("child"); "one" = one
// thread. With "report", print this process's own CPU time (user+system, all
// threads and waited-for children, from getrusage) in microseconds at the end.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static long ms;
static void *burn(void *arg) {
    (void)arg;
    struct timespec t;
    volatile unsigned long x = 0;
    // Measured from entry: a forked child inherits nothing, a parent's start-up
    // time before this call does not count.
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    long start = t.tv_sec * 1000 + t.tv_nsec / 1000000;
    for (;;) {
        for (int i = 0; i < 100000; i++) x += i;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
        if (t.tv_sec * 1000 + t.tv_nsec / 1000000 - start >= ms) return NULL;
    }
}
int main(int argc, char **argv) {
    ms = argc > 2 ? atol(argv[2]) : 200;
    const char *mode = argc > 1 ? argv[1] : "one";
    if (!strcmp(mode, "threads")) {
        pthread_t t;
        pthread_create(&t, NULL, burn, NULL);
        burn(NULL);
        pthread_join(t, NULL);
    } else if (!strcmp(mode, "child")) {
        pid_t p = fork();
        burn(NULL);
        if (p == 0) _exit(0);
        waitpid(p, NULL, 0);
    } else {
        burn(NULL);
    }
    if (argc > 3 && !strcmp(argv[3], "report")) {
        long long us = 0;
        int who[] = {RUSAGE_SELF, RUSAGE_CHILDREN};
        for (int i = 0; i < 2; i++) {
            struct rusage ru;
            getrusage(who[i], &ru);
            us += ru.ru_utime.tv_sec * 1000000LL + ru.ru_utime.tv_usec;
            us += ru.ru_stime.tv_sec * 1000000LL + ru.ru_stime.tv_usec;
        }
        printf("self_us %lld\n", us);
    }
    return 0;
}
