print(500, flush=True)
n = 0
while True:
    n += 1
