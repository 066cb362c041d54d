package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

func main() {
	in := bufio.NewReader(os.Stdin)
	lo, hi := 1, 1000
	for lo <= hi {
		mid := (lo + hi) / 2
		fmt.Println(mid) // os.Stdout is not buffered: each guess is sent at once
		reply, err := in.ReadString('\n')
		if err != nil {
			return
		}
		switch strings.TrimSpace(reply) {
		case "correct":
			return
		case "lower":
			hi = mid - 1
		default:
			lo = mid + 1
		}
	}
}
