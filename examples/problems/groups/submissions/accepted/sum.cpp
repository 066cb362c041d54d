#include <iostream>
int main() { int n; long long s = 0, x; std::cin >> n; while (n-- > 0 && std::cin >> x) s += x; std::cout << s << "\n"; }
