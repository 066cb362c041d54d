# Each game: read n, then binary search 1..n.
n = int(input())
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
