#include <stdio.h>
#include <string.h>
/* Each game: read n, then binary search 1..n. */
int main(void) {
    int n; char reply[32];
    if (scanf("%d", &n) != 1) return 1;
    int lo = 1, hi = n;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        printf("%d\n", mid); fflush(stdout);
        if (scanf("%31s", reply) != 1) return 1;
        if (!strcmp(reply, "correct")) return 0;
        if (!strcmp(reply, "lower")) hi = mid - 1; else lo = mid + 1;
    }
    return 0;
}
