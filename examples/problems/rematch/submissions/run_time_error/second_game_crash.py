# Plays the first game (n = 10 or 1000 in every test), crashes in the second.
n = int(input())
if n not in (2, 10, 1000):
    raise RuntimeError("the second game")
lo, hi = 1, n
while lo <= hi:
    mid = (lo + hi) // 2
    print(mid, flush=True)
    reply = input()
    if reply == "correct":
        break
    if reply == "lower":
        hi = mid - 1
    else:
        lo = mid + 1
