#include <iostream>
#include <string>
// Plays the first game (n = 10 or 1000 in every test), spins in the second.
int main() {
    int n;
    std::cin >> n;
    if (n != 10 && n != 1000 && n != 2) {
        volatile unsigned long long spin = 0;
        for (;;) spin++;
    }
    int lo = 1, hi = n;
    std::string reply;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        std::cout << mid << std::endl;
        std::cin >> reply;
        if (reply == "correct") return 0;
        if (reply == "lower") hi = mid - 1; else lo = mid + 1;
    }
}
