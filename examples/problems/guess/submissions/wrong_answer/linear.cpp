#include <iostream>
#include <string>
int main() {
    std::string reply;
    for (int g = 1000; g >= 1; g--) {
        std::cout << g << std::endl;
        if (!(std::cin >> reply) || reply == "correct") return 0;
    }
}
