// mem MIB [hold_ms]: touch exactly MIB MiB of fresh memory, then exit 0.
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoul(argv[1], 0, 10) : 100;
    size_t len = mib << 20;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 3;
    for (size_t i = 0; i < len; i += 4096) p[i] = 1;
    if (argc > 2) usleep(atoi(argv[2]) * 1000);
    return 0;
}
