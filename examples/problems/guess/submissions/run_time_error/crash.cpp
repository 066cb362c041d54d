#include <iostream>
#include <string>
int main() { std::string reply; std::cout << 500 << std::endl; std::cin >> reply; return 2; }
