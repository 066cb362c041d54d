print("banana", flush=True)
input()
