// Package report turns `go test -bench` output into BENCHMARKS.md: the
// median of each metric over the -count runs, peers side by side with
// execfsm's speed-up, and the other benchmarks with their own metrics
// (ratios to raw stores, ns per key).
package report

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Result is the runs of one benchmark.
type Result struct {
	Package string               // the last element of the package path
	Name    string               // without the -GOMAXPROCS suffix
	Metrics map[string][]float64 // unit → one value per run
}

// Median returns the median of unit over the runs, and false if absent.
func (r *Result) Median(unit string) (float64, bool) {
	vs := slices.Clone(r.Metrics[unit])
	if len(vs) == 0 {
		return 0, false
	}
	sort.Float64s(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2], true
	}
	return (vs[n/2-1] + vs[n/2]) / 2, true
}

// Run is a whole benchmark output.
type Run struct {
	Env     []string // goos, goarch, cpu lines
	Results []*Result
}

var procSuffix = regexp.MustCompile(`-\d+$`)

// Parse reads `go test -bench` output. Lines that are not benchmark
// results or environment lines are ignored; a result line that does not
// parse is an error naming its line number.
func Parse(r io.Reader) (*Run, error) {
	run := &Run{}
	byName := map[string]*Result{}
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		for _, p := range []string{"goos:", "goarch:", "cpu:"} {
			if strings.HasPrefix(line, p) && !slices.Contains(run.Env, line) {
				run.Env = append(run.Env, line)
			}
		}
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = p[strings.LastIndexByte(p, '/')+1:]
		}
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue // a benchmark's name printed before its result line
		}
		if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
			continue // not a result line (a log line that starts with Benchmark)
		}
		if len(f)%2 != 0 {
			return nil, fmt.Errorf("line %d: odd number of value/unit fields: %q", n, line)
		}
		name := procSuffix.ReplaceAllString(f[0], "")
		res := byName[pkg+" "+name]
		if res == nil {
			res = &Result{Package: pkg, Name: name, Metrics: map[string][]float64{}}
			byName[pkg+" "+name] = res
			run.Results = append(run.Results, res)
		}
		for k := 2; k+1 < len(f); k += 2 {
			v, err := strconv.ParseFloat(f[k], 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("line %d: value %q of %s is not a number", n, f[k], f[k+1])
			}
			res.Metrics[f[k+1]] = append(res.Metrics[f[k+1]], v)
		}
	}
	return run, sc.Err()
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
