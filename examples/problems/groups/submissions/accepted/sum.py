import sys
n, *xs = map(int, sys.stdin.read().split())
print(sum(xs[:n]))
