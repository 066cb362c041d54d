#include <stdio.h>
int main(void) { long long n; if (scanf("%lld", &n) != 1) return 1; printf("%lld -1\n", n + 1); return 0; }
