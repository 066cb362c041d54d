# Reads n but searches 1..1000 anyway: its first guess, 500, is out of range
# in every game on a smaller range (the sample's first game, every second game).
input()
lo, hi = 1, 1000
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
