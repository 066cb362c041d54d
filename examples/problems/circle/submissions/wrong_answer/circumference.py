import math
r = float(input())
print(2 * math.pi * r)
