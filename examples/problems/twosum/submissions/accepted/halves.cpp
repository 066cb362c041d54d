#include <iostream>
int main() { long long n; std::cin >> n; std::cout << n / 2 << " " << n - n / 2 << "\n"; }
