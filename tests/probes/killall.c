// kill(-1, SIGKILL): every process this one may signal; prints the result first.
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
int main(void) {
    printf("about to kill -1\n");
    fflush(stdout);
    int rc = kill(-1, SIGKILL);
    printf("kill %d errno %d\n", rc, rc < 0 ? errno : 0);
    return 0;
}
