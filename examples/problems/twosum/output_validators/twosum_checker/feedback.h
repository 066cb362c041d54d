// Kattis output-validator conventions: exit 42 accepts, 43 rejects; a message
// for the judges goes to feedback_dir/judgemessage.txt.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <string>

static std::string feedback_dir;

[[noreturn]] inline void verdict(int code, const char *message) {
    std::string path = feedback_dir + "judgemessage.txt";
    if (FILE *f = std::fopen(path.c_str(), "w")) {
        std::fputs(message, f);
        std::fclose(f);
    }
    std::exit(code);
}
[[noreturn]] inline void accept() { verdict(42, "ok\n"); }
[[noreturn]] inline void reject(const char *why) { verdict(43, why); }
