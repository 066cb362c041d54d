// leave MODE: what one run may leave for the next one in the same slot.
// "leave": write /tmp/left, create a SysV shared memory segment and a message
// queue, start a setsid'd daemon, print "left". "look": print what of that it
// finds ("tmp", "shm N", "msg N", "procs N", "clean" when nothing).
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/shm.h>
#include <unistd.h>

static int lines_after_header(const char *path) {
    FILE *f = fopen(path, "r");
    char line[512];
    int n = -1;
    while (f && fgets(line, sizeof line, f)) n++;
    if (f) fclose(f);
    return n < 0 ? 0 : n;
}

static int procs(void) {
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)))
        if (isdigit((unsigned char)e->d_name[0])) n++;
    if (d) closedir(d);
    return n;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "leave")) {
        FILE *f = fopen("/tmp/left", "w");
        if (f) fputs("secret\n", f), fclose(f);
        shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
        msgget(IPC_PRIVATE, IPC_CREAT | 0600);
        if (fork() == 0) {
            setsid();
            if (fork() == 0) { sleep(100); _exit(0); }
            _exit(0);
        }
        printf("left\n");
        fflush(stdout);
        usleep(20000);
        return 0;
    }
    int found = 0;
    if (access("/tmp/left", F_OK) == 0) printf("tmp\n"), found = 1;
    int shm = lines_after_header("/proc/sysvipc/shm");
    int msg = lines_after_header("/proc/sysvipc/msg");
    if (shm) printf("shm %d\n", shm), found = 1;
    if (msg) printf("msg %d\n", msg), found = 1;
    int p = procs();
    if (p != 2) printf("procs %d\n", p), found = 1;
    if (!found) printf("clean\n");
    return 0;
}
