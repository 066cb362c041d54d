# Guesses the middle, then assumes the number is above it: wrong below it.
words = input().split()
if len(words) == 1:
    print((int(words[0]) + 1) // 2)
else:
    n, guess, distance = map(int, words)
    print(guess + distance)
