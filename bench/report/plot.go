package report

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// A recovery series is one line of the recovery plot: the recoveries
// of one store one way, by size.
type recoverySeries struct {
	label  string
	color  string
	dashed bool
	points [][2]float64 // executions, ms
}

// recoveryWays are the lines the plot draws, by the last part of the
// benchmark's name.
var recoveryWays = []struct {
	store, way, label, color string
	dashed                   bool
}{
	{"bolt", "listed", "bbolt", "#1f77b4", false},
	{"etcd", "listed", "etcd", "#d62728", false},
	{"bolt", "read-each", "bbolt, each read again", "#1f77b4", true},
	{"etcd", "read-each", "etcd, each read again", "#d62728", true},
	{"kube", "listed", "Kubernetes (ConfigMaps)", "#2ca02c", false},
	{"kube", "read-each", "Kubernetes, each read again", "#2ca02c", true},
}

// ErrNoRecovery is what WriteRecoveryPlot returns for a run without
// BenchmarkRecovery results.
var ErrNoRecovery = errors.New("no BenchmarkRecovery results to plot")

// WriteRecoveryPlot draws BenchmarkRecovery's results as an SVG chart:
// the time a restarted controller takes to be back in line against the
// number of executions, both on logarithmic scales, a line per store and
// way (records handed over from the listing, solid; each read again,
// dashed), so a reader sees how recovery grows rather than reading it
// off a table.
func WriteRecoveryPlot(w io.Writer, run *Run) error {
	var series []recoverySeries
	for _, way := range recoveryWays {
		s := recoverySeries{label: way.label, color: way.color, dashed: way.dashed}
		prefix := "BenchmarkRecovery/" + way.store + "/"
		for _, r := range run.Results {
			size, ok := strings.CutPrefix(r.Name, prefix)
			if r.Package != "reliability" || !ok {
				continue
			}
			size, ok = strings.CutSuffix(size, "/"+way.way)
			n, err := strconv.Atoi(size)
			ms, has := r.Median("ms")
			if !ok || err != nil || n < 1 || !has || ms <= 0 {
				continue
			}
			s.points = append(s.points, [2]float64{float64(n), ms})
		}
		if len(s.points) > 0 {
			slices.SortFunc(s.points, func(a, b [2]float64) int { return int(math.Copysign(1, a[0]-b[0])) })
			series = append(series, s)
		}
	}
	if len(series) == 0 {
		return ErrNoRecovery
	}
	// Decades that hold every point.
	xLo, xHi, yLo, yHi := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, p := range s.points {
			xLo, xHi = min(xLo, math.Log10(p[0])), max(xHi, math.Log10(p[0]))
			yLo, yHi = min(yLo, math.Log10(p[1])), max(yHi, math.Log10(p[1]))
		}
	}
	xLo, xHi, yLo, yHi = math.Floor(xLo), math.Ceil(xHi), math.Floor(yLo), math.Ceil(yHi)
	if xHi == xLo {
		xHi++
	}
	if yHi == yLo {
		yHi++
	}
	const (
		width, height          = 720, 440
		left, right, top, base = 80, 250, 40, 60
	)
	px := func(n float64) float64 { return left + (math.Log10(n)-xLo)/(xHi-xLo)*(width-left-right) }
	py := func(ms float64) float64 { return height - base - (math.Log10(ms)-yLo)/(yHi-yLo)*(height-top-base) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="13">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15">A restarted controller back in line: time against executions</text>`+"\n", left)
	for d := xLo; d <= xHi; d++ {
		x := px(math.Pow(10, d))
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x, top, x, height-base)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x, height-base+20, countLabel(d))
	}
	for d := yLo; d <= yHi; d++ {
		y := py(math.Pow(10, d))
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", left, y, width-right, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-8, y+4, durationLabel(d))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">executions (each with a full audit trail)</text>`+"\n", (left+width-right)/2, height-base+44)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`+"\n", left, top, width-left-right, height-top-base)
	for k, s := range series {
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		var pts []string
		for _, p := range s.points {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p[0]), py(p[1])))
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), s.color, dash)
		for _, p := range s.points {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s: %s executions, %s ms</title></circle>`+"\n",
				px(p[0]), py(p[1]), s.color, s.label, num(p[0]), num(p[1]))
		}
		ly := top + 10 + k*22
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", width-right+16, ly, width-right+46, ly, s.color, dash)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", width-right+52, ly+4, s.label)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// countLabel names 10^d: 1k, 10k, 100k, 1M.
func countLabel(d float64) string {
	n := math.Pow(10, d)
	switch {
	case n >= 1e6:
		return num(n/1e6) + "M"
	case n >= 1e3:
		return num(n/1e3) + "k"
	}
	return num(n)
}

// durationLabel names 10^d milliseconds: 10 ms, 1 s.
func durationLabel(d float64) string {
	ms := math.Pow(10, d)
	if ms >= 1000 {
		return num(ms/1000) + " s"
	}
	return num(ms) + " ms"
}
