#include <stdio.h>
/* Pass 1 reads "n" and guesses 1; pass 2 reads "n guess distance". */
int main(void) {
    long long n, guess, distance;
    if (scanf("%lld", &n) != 1) return 1;
    if (scanf("%lld %lld", &guess, &distance) != 2) {
        printf("1\n");
        return 0;
    }
    printf("%lld\n", guess + distance);
    return 0;
}
