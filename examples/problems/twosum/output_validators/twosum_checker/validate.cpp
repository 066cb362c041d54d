// validate input answer feedback_dir < submission_output
#include "feedback.h"
#include <fstream>
#include <iostream>

int main(int argc, char **argv) {
    if (argc < 4) return 1;
    feedback_dir = argv[3];
    std::ifstream in(argv[1]);
    long long n;
    if (!(in >> n)) return 1;  // a broken input file is a judge error
    long long x, y;
    if (!(std::cin >> x >> y)) reject("expected two integers\n");
    std::string extra;
    if (std::cin >> extra) reject("trailing output\n");
    if (x < 0 || y < 0) reject("summands must be non-negative\n");
    if (x + y != n) reject("the summands do not add up to n\n");
    accept();
}
