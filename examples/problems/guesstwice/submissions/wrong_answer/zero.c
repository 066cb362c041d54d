#include <stdio.h>
/* 0 is never in 1..n: rejected in the first pass. */
int main(void) { printf("0\n"); return 0; }
