#include <stdio.h>
int main(void) { volatile unsigned long n = 0; long long a, b; if (scanf("%lld %lld", &a, &b) != 2) return 1; for (;;) n++; }
