import sys
line = "7" * 4095 + "\n"
for _ in range(16384):
    sys.stdout.write(line)
