"""Multi-pass validator: guesstwice.py input answer feedback_dir < output.

Pass 1 (no state.txt in the feedback directory yet): the output is one guess in
1..n; the next pass gets "n guess |secret - guess|" through nextpass.in. Pass 2:
the output must be the secret (the answer file). state.txt stays in the
feedback directory between passes (the format keeps every file but
nextpass.in); judgemessage.txt is appended to, one line per pass.
"""
import os
import sys


def main():
    input_file, answer_file, feedback_dir = sys.argv[1:4]
    state = os.path.join(feedback_dir, "state.txt")

    def verdict(code, message):
        with open(os.path.join(feedback_dir, "judgemessage.txt"), "a") as f:
            f.write(message + "\n")
        sys.exit(code)

    with open(answer_file) as f:
        secret = int(f.read().split()[0])
    with open(input_file) as f:
        n = int(f.read().split()[0])
    output = sys.stdin.read().split()
    if len(output) != 1 or not output[0].lstrip("-").isdigit():
        verdict(43, "expected one integer, got %r" % " ".join(output)[:50])
    guess = int(output[0])
    if not os.path.exists(state):
        if not 1 <= guess <= n:
            verdict(43, "pass 1: %d is not in 1..%d" % (guess, n))
        with open(state, "w") as f:
            f.write("%d\n" % guess)
        with open(os.path.join(feedback_dir, "nextpass.in"), "w") as f:
            f.write("%d %d %d\n" % (n, guess, abs(secret - guess)))
        verdict(42, "pass 1: guessed %d, %d away" % (guess, abs(secret - guess)))
    if guess != secret:
        verdict(43, "pass 2: guessed %d, the number is %d" % (guess, secret))
    verdict(42, "pass 2: found %d" % secret)


main()
