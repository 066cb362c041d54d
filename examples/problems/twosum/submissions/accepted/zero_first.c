#include <stdio.h>
int main(void) { long long n; if (scanf("%lld", &n) != 1) return 1; printf("0 %lld\n", n); return 0; }
