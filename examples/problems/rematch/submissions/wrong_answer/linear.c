#include <stdio.h>
#include <string.h>
/* Counts up from 1: too many guesses for a large number in the first game. */
int main(void) {
    int n; char reply[32];
    if (scanf("%d", &n) != 1) return 1;
    for (int g = 1; g <= n; g++) {
        printf("%d\n", g); fflush(stdout);
        if (scanf("%31s", reply) != 1) return 0;
        if (!strcmp(reply, "correct")) return 0;
    }
    return 0;
}
