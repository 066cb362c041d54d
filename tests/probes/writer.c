// writer PATH|- BYTES: write BYTES bytes to PATH (or stdout); print the errno of a
// failure to stderr ("written N errno E") and exit 0 either way.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
    long long want = atoll(argv[2]), done = 0;
    int fd = strcmp(argv[1], "-") ? open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644) : 1;
    static char buf[65536];
    memset(buf, 'x', sizeof buf);
    int err = fd < 0 ? errno : 0;
    while (!err && done < want) {
        long long n = want - done < (long long)sizeof buf ? want - done : (long long)sizeof buf;
        ssize_t w = write(fd, buf, n);
        if (w < 0) err = errno; else done += w;
    }
    fprintf(stderr, "written %lld errno %d\n", done, err);
    return 0;
}
