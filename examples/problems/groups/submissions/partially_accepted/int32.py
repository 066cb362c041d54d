import sys
n, *xs = map(int, sys.stdin.read().split())
s = sum(xs[:n]) & 0xFFFFFFFF
print(s - (1 << 32) if s >= 1 << 31 else s)
