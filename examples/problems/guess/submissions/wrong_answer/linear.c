#include <stdio.h>
#include <string.h>
/* counts up from 1: too many guesses for big numbers; keeps writing after the validator gave up */
int main(void) {
    char reply[32];
    for (int g = 1; g <= 1000; g++) {
        printf("%d\n", g); fflush(stdout);
        if (scanf("%31s", reply) != 1) return 0;
        if (!strcmp(reply, "correct")) return 0;
    }
    return 0;
}
