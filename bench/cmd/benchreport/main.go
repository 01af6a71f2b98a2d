// Command benchreport reads `go test -bench` output on standard input and
// writes BENCHMARKS.md to standard output; bench/run.sh runs it.
//
//	go test -run '^$' -bench . -benchmem -count 5 ./bench | go run ./bench/cmd/benchreport -header header.md
//
// With -plot file it also draws the recovery benchmark's results as an
// SVG chart there (report.WriteRecoveryPlot).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/execfsm/execfsm/bench/report"
)

func main() {
	header := flag.String("header", "", "file whose text opens the report")
	plot := flag.String("plot", "", "file to draw the recovery results in (SVG)")
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
	if *plot != "" {
		if err := writePlot(*plot, run); err != nil {
			fmt.Fprintln(os.Stderr, "benchreport:", err)
			os.Exit(1)
		}
	}
}

func writePlot(path string, run *report.Run) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := report.WriteRecoveryPlot(f, run); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
