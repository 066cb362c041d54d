#include <stdio.h>
/* 32-bit sums (wrapping): right on group1, wrong on group2 */
int main(void) { int n; long long x; unsigned s = 0; if (scanf("%d", &n) != 1) return 1; while (n-- > 0 && scanf("%lld", &x) == 1) s += (unsigned)x; printf("%d\n", (int)s); return 0; }
