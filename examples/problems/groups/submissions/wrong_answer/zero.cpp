#include <iostream>
int main() { std::cout << 0 << "\n"; }
