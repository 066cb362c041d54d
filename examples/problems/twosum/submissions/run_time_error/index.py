n = int(input())
print([n][5], 0)
