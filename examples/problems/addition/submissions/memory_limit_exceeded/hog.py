blocks = []
for i in range(32):
    blocks.append(bytearray(16 << 20))
print(len(blocks))
