# Right in the first pass, then crashes in the second.
words = input().split()
if len(words) == 1:
    print(1)
else:
    raise RuntimeError("the second pass")
