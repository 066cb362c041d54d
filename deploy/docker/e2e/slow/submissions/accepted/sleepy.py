# Right, but slow on the clock (not on the CPU): 1.5 s per test, 11 tests.
import time

a, b = map(int, input().split())
time.sleep(1.5)
print(a + b)
