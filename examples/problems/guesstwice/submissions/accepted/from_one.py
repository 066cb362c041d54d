# Pass 1: guess 1, so the distance names the number; pass 2: 1 + distance.
words = input().split()
if len(words) == 1:
    print(1)
else:
    n, guess, distance = map(int, words)
    print(guess + distance)
