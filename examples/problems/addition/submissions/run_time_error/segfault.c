#include <stdio.h>
int main(void) { volatile int *p = (int *)0; *p = 1; printf("3\n"); return 0; }
