"""Interactive validator: guess.py input answer feedback_dir < guesses > replies."""
import sys

MAX_GUESSES = 10


def verdict(feedback_dir, code, message):
    with open(feedback_dir + "judgemessage.txt", "w") as f:
        f.write(message + "\n")
    sys.exit(code)


def main():
    input_file, _answer_file, feedback_dir = sys.argv[1:4]
    with open(input_file) as f:
        secret = int(f.read().split()[0])
    for guesses in range(1, MAX_GUESSES + 1):
        line = sys.stdin.readline()
        if not line:
            verdict(feedback_dir, 43, "the submission stopped guessing")
        try:
            guess = int(line)
        except ValueError:
            verdict(feedback_dir, 43, "not a number: %r" % line[:50])
        if guess == secret:
            print("correct", flush=True)
            verdict(feedback_dir, 42, "found in %d guesses" % guesses)
        print("lower" if secret < guess else "higher", flush=True)
    verdict(feedback_dir, 43, "more than %d guesses" % MAX_GUESSES)


main()
