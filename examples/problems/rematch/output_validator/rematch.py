"""Interactive multi-pass validator: rematch.py input answer feedback_dir.

The input file holds "n secret" (the test's .in in the first game, the
nextpass.in this validator wrote in the second). games.txt in the feedback
directory counts the games played: it stays between passes, as the format keeps
every feedback file but nextpass.in.
"""
import os
import sys


def main():
    input_file, _answer_file, feedback_dir = sys.argv[1:4]
    games_file = os.path.join(feedback_dir, "games.txt")

    def verdict(code, message):
        with open(os.path.join(feedback_dir, "judgemessage.txt"), "a") as f:
            f.write(message + "\n")
        sys.exit(code)

    with open(input_file) as f:
        n, secret = map(int, f.read().split()[:2])
    games = 0
    if os.path.exists(games_file):
        with open(games_file) as f:
            games = int(f.read())
    game = games + 1
    with open(games_file, "w") as f:
        f.write("%d\n" % game)
    print(n, flush=True)
    allowed = n.bit_length()
    first = None
    for guesses in range(1, allowed + 1):
        line = sys.stdin.readline()
        if not line:
            verdict(43, "game %d: the submission stopped guessing" % game)
        try:
            guess = int(line)
        except ValueError:
            verdict(43, "game %d: not a number: %r" % (game, line[:50]))
        if not 1 <= guess <= n:
            verdict(43, "game %d: %d is not in 1..%d" % (game, guess, n))
        if first is None:
            first = guess
        if guess == secret:
            print("correct", flush=True)
            # The game is over: anything more the submission says is wrong.
            if sys.stdin.read().strip():
                verdict(43, "game %d: output after \"correct\"" % game)
            if game == 1:
                top = 40 * guesses
                with open(os.path.join(feedback_dir, "nextpass.in"), "w") as f:
                    f.write("%d %d\n" % (top, first % top + 1))
            verdict(42, "game %d: found %d in %d guesses" % (game, secret, guesses))
        print("lower" if secret < guess else "higher", flush=True)
    verdict(43, "game %d: more than %d guesses" % (game, allowed))


main()
