package main

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// benchFigure is a figure of a page that comes from a benchmark: the
// number shown, in its unit, and the BENCHMARKS.md row and metric it is
// marked with (<!-- bench: NAME METRIC -->, right after the figure).
var benchFigure = regexp.MustCompile(`([0-9][0-9,]*(?:\.[0-9]+)?)\s*(ms|s|states|×)?<!-- bench: (\S+) (\S+) -->`)

// Every figure of the README and docs/ marked as a benchmark's is the
// one BENCHMARKS.md's run of record measured, to the precision shown: a
// page cannot keep a figure the benchmarks no longer give.
func TestEveryBenchmarkFigureOfThePagesIsTheRunOfRecords(t *testing.T) {
	root := filepath.Join("..", "..")
	measured := benchmarkMetrics(t, root)
	marked := 0
	for page, text := range pageTexts(t, root) {
		for _, m := range benchFigure.FindAllStringSubmatch(text, -1) {
			shown, unit, name, metric := m[1], m[2], m[3], m[4]
			want, ok := measured[name][metric]
			require.True(t, ok, "%s: %s is marked as %s's %s, which BENCHMARKS.md does not have", filepath.Base(page), m[0], name, metric)
			got, err := strconv.ParseFloat(strings.ReplaceAll(shown, ",", ""), 64)
			require.NoError(t, err)
			if unit == "s" && metric == "ms" {
				got *= 1000
			}
			decimals := 0
			if _, frac, ok := strings.Cut(shown, "."); ok {
				decimals = len(frac)
			}
			step := math.Pow(10, -float64(decimals))
			if unit == "s" && metric == "ms" {
				step *= 1000
			}
			require.LessOrEqual(t, math.Abs(got-want), step/2+1e-9,
				"%s: %s shows %s's %s as %s%s; BENCHMARKS.md has %v", filepath.Base(page), m[0], name, metric, shown, unit, want)
			marked++
		}
	}
	require.Greater(t, marked, 2, "the pages' benchmark figures were found")
}

// pageTexts are the pages whose claims the tests check, by path: the
// README, RELIABILITY.md and docs/ (not the decision records: history).
func pageTexts(t *testing.T, root string) map[string]string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	texts := map[string]string{}
	for _, page := range append(pages, filepath.Join(root, "README.md"), filepath.Join(root, "RELIABILITY.md")) {
		text, err := os.ReadFile(page)
		require.NoError(t, err)
		texts[page] = string(text)
	}
	return texts
}

// benchmarkMetrics reads BENCHMARKS.md's result rows: by benchmark
// name, each metric's median.
func benchmarkMetrics(t *testing.T, root string) map[string]map[string]float64 {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(root, "BENCHMARKS.md"))
	require.NoError(t, err)
	metrics := map[string]map[string]float64{}
	for _, line := range strings.Split(string(text), "\n") {
		cells := strings.Split(line, " | ")
		if len(cells) != 3 || !strings.HasPrefix(line, "| ") {
			continue
		}
		name := strings.TrimSpace(cells[1])
		values := map[string]float64{}
		for _, pair := range strings.Split(strings.TrimSuffix(cells[2], " |"), ", ") {
			value, unit, ok := strings.Cut(strings.TrimSpace(pair), " ")
			v, err := strconv.ParseFloat(value, 64)
			if ok && err == nil {
				values[unit] = v
			}
		}
		if len(values) > 0 {
			metrics[name] = values
		}
	}
	require.NotEmpty(t, metrics, "BENCHMARKS.md has its result rows")
	return metrics
}
