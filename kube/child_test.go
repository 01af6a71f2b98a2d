package kube_test

import (
	"fmt"
	"os"
)

func runChild(raw string) int {
	fmt.Fprintln(os.Stderr, "unknown child", raw)
	return 2
}
