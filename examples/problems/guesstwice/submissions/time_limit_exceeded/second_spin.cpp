#include <iostream>
// Right in the first pass, then spins in the second.
int main() {
    long long n, guess, distance;
    std::cin >> n;
    if (!(std::cin >> guess >> distance)) {
        std::cout << 1 << std::endl;
        return 0;
    }
    volatile unsigned long long spin = 0;
    for (;;) spin++;
}
