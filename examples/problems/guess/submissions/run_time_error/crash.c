#include <stdio.h>
#include <stdlib.h>
/* one guess, then a crash */
int main(void) { char reply[32]; printf("500\n"); fflush(stdout); if (scanf("%31s", reply) != 1) return 0; abort(); }
