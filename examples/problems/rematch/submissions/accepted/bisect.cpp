#include <iostream>
#include <string>
// Each game: read n, then binary search 1..n.
int main() {
    int n;
    std::cin >> n;
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
