#include <vector>
#include <iostream>
int main() { std::vector<std::vector<char>> v; for (int i = 0; i < 32; i++) v.emplace_back(16 << 20, 1); std::cout << v.size() << "\n"; }
