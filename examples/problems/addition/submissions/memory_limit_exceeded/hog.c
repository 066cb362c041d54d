#include <stdlib.h>
#include <string.h>
#include <stdio.h>
/* touches 512 MiB in 16 MiB pieces; the limit is 128 MiB */
int main(void) { for (int i = 0; i < 32; i++) { char *p = malloc(16 << 20); if (!p) return 1; memset(p, 1, 16 << 20); } printf("3\n"); return 0; }
