#include <stdio.h>
#include <math.h>
int main(void) { double r; if (scanf("%lf", &r) != 1) return 1; printf("%.9f\n", M_PI * r * r); return 0; }
