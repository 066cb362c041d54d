#include <stdio.h>
#include <string.h>
/* writes 64 MiB; the output limit is 1 MiB */
int main(void) { static char line[4096]; memset(line, '7', sizeof line - 1); line[sizeof line - 1] = '\n'; for (int i = 0; i < 16384; i++) fwrite(line, 1, sizeof line, stdout); return 0; }
