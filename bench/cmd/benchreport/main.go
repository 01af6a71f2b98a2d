// Command benchreport reads `go test -bench` output on standard input and
// writes BENCHMARKS.md to standard output; bench/run.sh runs it.
//
//	go test -run '^$' -bench . -benchmem -count 5 ./bench | go run ./bench/cmd/benchreport -header header.md
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/execfsm/execfsm/bench/report"
)

func main() {
	header := flag.String("header", "", "file whose text opens the report")
	flag.Parse()
	text := "# Benchmarks\n"
	if *header != "" {
		b, err := os.ReadFile(*header)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		text = string(b)
	}
	run, err := report.Parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
	if err := report.Write(os.Stdout, run, text); err != nil {
		fmt.Fprintln(os.Stderr, "benchreport:", err)
		os.Exit(1)
	}
}
