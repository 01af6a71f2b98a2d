// Package report turns `go test -bench` output into BENCHMARKS.md: the
// median of each metric over the -count runs, peers side by side with
// execfsm's speed-up, and the other benchmarks with their own metrics
// (ratios to raw stores, ns per key).
package report

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/perf/benchfmt"
	"golang.org/x/perf/benchmath"
)

// Result is the runs of one benchmark.
type Result struct {
	Package string               // the last element of the package path
	Name    string               // without the -GOMAXPROCS suffix
	Metrics map[string][]float64 // unit → one value per run
}

// Median returns the median of unit over the runs, and false if absent:
// benchstat's center (golang.org/x/perf/benchmath, assuming nothing of
// the distribution).
func (r *Result) Median(unit string) (float64, bool) {
	vs := r.Metrics[unit]
	if len(vs) == 0 {
		return 0, false
	}
	sample := benchmath.NewSample(slices.Clone(vs), &benchmath.DefaultThresholds)
	return benchmath.AssumeNothing.Summary(sample, 0.95).Center, true
}

// Run is a whole benchmark output.
type Run struct {
	Env     []string // goos, goarch, cpu lines
	Results []*Result
}

// Parse reads `go test -bench` output with golang.org/x/perf/benchfmt,
// benchstat's reader. A line benchfmt cannot read as a result is an
// error naming its line, and so is a value that is not a finite number;
// units are kept as the benchmark wrote them (ns/op, not sec/op).
func Parse(r io.Reader) (*Run, error) {
	run := &Run{}
	byName := map[string]*Result{}
	env := map[string]bool{}
	br := benchfmt.NewReader(r, "the benchmark output")
	for br.Scan() {
		var res *benchfmt.Result
		switch rec := br.Result().(type) {
		case *benchfmt.SyntaxError:
			return nil, fmt.Errorf("line %d: %s", rec.Line, rec.Msg)
		case *benchfmt.Result:
			res = rec
		default:
			continue
		}
		for _, key := range []string{"goos", "goarch", "cpu"} {
			if v := res.GetConfig(key); v != "" && !env[key+v] {
				env[key+v] = true
				run.Env = append(run.Env, key+": "+v)
			}
		}
		pkg := res.GetConfig("pkg")
		pkg = pkg[strings.LastIndexByte(pkg, '/')+1:]
		base, parts := res.Name.Parts()
		name := "Benchmark" + string(base)
		for _, part := range parts {
			if !isProcs(string(part)) {
				name += string(part)
			}
		}
		into := byName[pkg+" "+name]
		if into == nil {
			into = &Result{Package: pkg, Name: name, Metrics: map[string][]float64{}}
			byName[pkg+" "+name] = into
			run.Results = append(run.Results, into)
		}
		for _, v := range res.Values {
			value, unit := v.Value, v.Unit
			if v.OrigUnit != "" { // benchfmt tidied it: ns/op became sec/op
				value, unit = v.OrigValue, v.OrigUnit
			}
			if math.IsNaN(value) || math.IsInf(value, 0) {
				return nil, fmt.Errorf("%s: value %v of %s is not a number", name, value, unit)
			}
			into.Metrics[unit] = append(into.Metrics[unit], value)
		}
	}
	return run, br.Err()
}

// isProcs says whether a part of a benchmark's name is its -GOMAXPROCS
// suffix, which results of one run share and the report leaves out.
func isProcs(part string) bool {
	digits, ok := strings.CutPrefix(part, "-")
	_, err := strconv.Atoi(digits)
	return ok && err == nil
}

// peers are the libraries of the side-by-side benchmarks; execfsm is the
// baseline of the speed-up column.
var peers = []string{"execfsm", "looplab", "stateless-immediate", "stateless-queued", "client-go", "bare-array", "bare-cas"}

// Write renders the run as Markdown.
func Write(w io.Writer, run *Run, header string) error {
	var b strings.Builder
	b.WriteString(header)
	if len(run.Env) > 0 {
		b.WriteString("\n```\n" + strings.Join(run.Env, "\n") + "\n```\n")
	}
	writeTargets(&b, run)
	groups, order, others := group(run)
	if len(order) > 0 {
		b.WriteString("\n## execfsm and its peers\n\nMedian of the runs; speed-up is the peer's time over execfsm's (higher: execfsm is faster).\n")
	}
	for _, g := range order {
		fmt.Fprintf(&b, "\n### %s\n\n| library | ns/op | B/op | allocs/op | execfsm speed-up |\n| --- | ---: | ---: | ---: | ---: |\n", g)
		base, _ := groups[g]["execfsm"].Median("ns/op")
		for _, lib := range peers {
			r := groups[g][lib]
			if r == nil {
				continue
			}
			ns, _ := r.Median("ns/op")
			bop, _ := r.Median("B/op")
			allocs, _ := r.Median("allocs/op")
			ratio := "—"
			if lib != "execfsm" && base > 0 {
				ratio = fmt.Sprintf("%.1f×", ns/base)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", lib, num(ns), num(bop), num(allocs), ratio)
		}
	}
	if len(others) > 0 {
		b.WriteString("\n## Stores, the reconcile loop and the core\n\nMedian of the runs, every metric the benchmark reports.\n\n| package | benchmark | metrics |\n| --- | --- | --- |\n")
		for _, r := range others {
			units := make([]string, 0, len(r.Metrics))
			for u := range r.Metrics {
				units = append(units, u)
			}
			sort.Strings(units)
			var parts []string
			for _, u := range units {
				v, _ := r.Median(u)
				parts = append(parts, num(v)+" "+u)
			}
			fmt.Fprintf(&b, "| %s | %s | %s |\n", r.Package, strings.TrimPrefix(r.Name, "Benchmark"), strings.Join(parts, ", "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// group splits results into peer groups (the last path element names a
// library) and everything else, keeping the input order.
func group(run *Run) (map[string]map[string]*Result, []string, []*Result) {
	groups := map[string]map[string]*Result{}
	var order []string
	var others []*Result
	for _, r := range run.Results {
		k := strings.LastIndexByte(r.Name, '/')
		if k < 0 || !slices.Contains(peers, r.Name[k+1:]) {
			others = append(others, r)
			continue
		}
		g, lib := strings.TrimPrefix(r.Name[:k], "Benchmark"), r.Name[k+1:]
		if groups[g] == nil {
			groups[g] = map[string]*Result{}
			order = append(order, g)
		}
		groups[g][lib] = r
	}
	// A group without execfsm has no baseline: report it plainly.
	kept := order[:0]
	for _, g := range order {
		if groups[g]["execfsm"] == nil {
			for _, r := range groups[g] {
				others = append(others, r)
			}
			continue
		}
		kept = append(kept, g)
	}
	return groups, kept, others
}

func num(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
