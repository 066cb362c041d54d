def main(
    print("never")
