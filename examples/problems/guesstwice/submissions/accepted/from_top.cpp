#include <iostream>
// Guess n first: the number is then n - distance.
int main() {
    long long n, guess, distance;
    std::cin >> n;
    if (!(std::cin >> guess >> distance)) {
        std::cout << n << "\n";
        return 0;
    }
    std::cout << guess - distance << "\n";
}
