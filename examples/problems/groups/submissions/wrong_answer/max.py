import sys
n, *xs = map(int, sys.stdin.read().split())
print(max(xs[:n]))
