package report

import (
	"encoding/xml"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const sample = `goos: linux
goarch: amd64
pkg: github.com/execfsm/execfsm/bench
cpu: Intel(R) Xeon(R) Processor
BenchmarkFire/lifecycle/execfsm-2         	21700282	        14.00 ns/op	       0 B/op	       0 allocs/op
BenchmarkFire/lifecycle/execfsm-2         	21700282	        16.00 ns/op	       0 B/op	       0 allocs/op
BenchmarkFire/lifecycle/execfsm-2         	21700282	        15.00 ns/op	       0 B/op	       0 allocs/op
BenchmarkFire/lifecycle/looplab-2         	  819363	       450.0 ns/op	     289 B/op	       5 allocs/op
BenchmarkLoopResync/keys=1000-2      	    8071	    144314 ns/op	       144.3 ns/key	        99.25 x-bare	     125 B/op	       1 allocs/op
PASS
`

func TestParseTakesMediansAndStripsTheProcSuffix(t *testing.T) {
	run, err := Parse(strings.NewReader(sample))
	require.NoError(t, err)
	require.Equal(t, []string{"goos: linux", "goarch: amd64", "cpu: Intel(R) Xeon(R) Processor"}, run.Env)
	require.Len(t, run.Results, 3)
	require.Equal(t, "BenchmarkFire/lifecycle/execfsm", run.Results[0].Name)
	ns, ok := run.Results[0].Median("ns/op")
	require.True(t, ok)
	require.Equal(t, 15.0, ns)
	_, ok = run.Results[0].Median("nope")
	require.False(t, ok)
}

func TestWriteShowsPeersWithTheSpeedUpAndOthersWithTheirMetrics(t *testing.T) {
	run, err := Parse(strings.NewReader(sample))
	require.NoError(t, err)
	var out strings.Builder
	require.NoError(t, Write(&out, run, "# Benchmarks\n"))
	got := out.String()
	require.Contains(t, got, "| looplab | 450 | 289 | 5 | 30.0× |")
	require.Contains(t, got, "| execfsm | 15 | 0 | 0 | — |")
	require.Contains(t, got, "| bench | LoopResync/keys=1000 | 125 B/op, 1 allocs/op, 144 ns/key, 144314 ns/op, 99.25 x-bare |")
}

func TestParseKeepsSameNamedBenchmarksOfDifferentPackagesApart(t *testing.T) {
	run, err := Parse(strings.NewReader("pkg: x/boltstore\nBenchmarkP-2 1 5 ns/op\npkg: x/etcdstore\nBenchmarkP-2 1 9 ns/op\n"))
	require.NoError(t, err)
	require.Len(t, run.Results, 2)
	require.Equal(t, "boltstore", run.Results[0].Package)
	require.Equal(t, "etcdstore", run.Results[1].Package)
}

func TestParseRefusesMalformedResultLines(t *testing.T) {
	_, err := Parse(strings.NewReader("BenchmarkX-2 10 5 ns/op 7\n"))
	require.ErrorContains(t, err, "line 1")
	_, err = Parse(strings.NewReader("BenchmarkX-2 10 five ns/op\n"))
	require.ErrorContains(t, err, "line 1: parsing measurement")
	_, err = Parse(strings.NewReader("BenchmarkX-2 10 NaN ns/op\n"))
	require.ErrorContains(t, err, "not a number")
	_, err = Parse(strings.NewReader("ok\nBenchmarkY-2 is not a result\n"))
	require.ErrorContains(t, err, "line 2", "a line benchstat cannot read is not skipped silently")
	run, err := Parse(strings.NewReader("BenchmarkX\nPASS\n"))
	require.NoError(t, err, "a benchmark's name alone, printed before its logs, is no result")
	require.Empty(t, run.Results)
}

func FuzzParse(f *testing.F) {
	f.Add(sample)
	f.Add("BenchmarkX-2 1 NaN ns/op\n")
	f.Add("Benchmark 1 2\n")
	f.Fuzz(func(t *testing.T, in string) {
		run, err := Parse(strings.NewReader(in))
		if err != nil {
			return
		}
		var out strings.Builder
		require.NoError(t, Write(&out, run, ""))
	})
}

func TestTargetsAreComputedFromTheMediansAndJudged(t *testing.T) {
	in := `pkg: github.com/execfsm/execfsm/bench
BenchmarkFire/lifecycle/execfsm-2   	100	15.00 ns/op	0 B/op	0 allocs/op
BenchmarkFire/lifecycle/looplab-2   	100	420.0 ns/op	289 B/op	5 allocs/op
BenchmarkFire/lifecycle/bare-cas-2  	100	3.000 ns/op	0 B/op	0 allocs/op
BenchmarkQueue/distinct/workers=4-2 	10	60000000 ns/op	400.0 client-go-ns/add	200.0 execfsm-ns/add	2.000 x-client-go
BenchmarkQueue/distinct/workers=4-2 	10	60000000 ns/op	400.0 client-go-ns/add	250.0 execfsm-ns/add	1.600 x-client-go
BenchmarkQueue/distinct/workers=4-2 	10	60000000 ns/op	400.0 client-go-ns/add	180.0 execfsm-ns/add	2.222 x-client-go
pkg: github.com/execfsm/execfsm/reliability
BenchmarkRecovery/bolt/10000/listed-2 	1	900000000 ns/op	900.0 ms
BenchmarkRecovery/bolt/100000/listed-2 	1	2100000000 ns/op	2100 ms	3300 heap-B/execution	2900 encoded-B/execution
BenchmarkLoad/bolt/2000x50-2 	1	1 ns/op	12000 transitions/s	6000 p99-µs
BenchmarkLoad/etcd/2000x50-2 	1	1 ns/op	5000 transitions/s	16000 p99-µs
`
	run, err := Parse(strings.NewReader(in))
	require.NoError(t, err)
	var out strings.Builder
	require.NoError(t, Write(&out, run, "# Benchmarks\n"))
	got := out.String()
	for _, row := range []string{
		"| 1 | bbolt load throughput over etcd's (10k × 100 through the Loop, 32 workers) | ≥ 2× | 2.40× | met |",
		"| 1 | bbolt load p99 over etcd's | ≤ 1× | 0.38× | met |",
		"| 3 | Machine.Fire against looplab/fsm on the lifecycle | ≥ 30× | 28.00× | not met |",
		"| 3 | Machine.Fire allocations | 0 | 0 | met |",
		"| 3 | Machine.Fire over one bare compare-and-swap (the floor) | — | 5.00× | — |",
		"| 4 | Loop against client-go's workqueue, 100k distinct keys, 4 workers | ≥ 2× | 2.00× | met |",
		"| 5 | recovery over 10k executions on bbolt | ≤ 1 s | 900 ms | met |",
		"| 35.1 | recovery over 100k executions on bbolt | ≤ 1 s | 2100 ms | not met |",
		"| 35.3 | live heap per execution at 100k (records, handles, Loop keys) over the encoded record | ≤ 2× | 1.14× | met |",
	} {
		require.Contains(t, got, row)
	}
	require.NotContains(t, got, "recovery over 10k executions on etcd", "a target the run did not measure is left out")
	require.Contains(t, got, "| bare-cas | 3 | 0 | 0 |", "bare-cas is a peer row")
}

// The recovery plot is an SVG document with a line per store and way
// that has results, its points left to right by size, and a run
// without recovery results is an error, not an empty chart.
func TestRecoveryPlotDrawsALinePerStoreAndWay(t *testing.T) {
	in := `pkg: github.com/execfsm/execfsm/reliability
BenchmarkRecovery/bolt/10000/listed-2 	1	260000000 ns/op	260.0 ms
BenchmarkRecovery/bolt/1000/listed-2 	1	40000000 ns/op	40.00 ms
BenchmarkRecovery/etcd/1000/listed-2 	1	150000000 ns/op	150.0 ms
BenchmarkRecovery/etcd/1000/read-each-2 	1	180000000 ns/op	180.0 ms
BenchmarkRecovery/bolt/1000/listed-memory-warm-2 	1	30000000 ns/op	30.00 ms
`
	run, err := Parse(strings.NewReader(in))
	require.NoError(t, err)
	var out strings.Builder
	require.NoError(t, WriteRecoveryPlot(&out, run))
	var doc struct {
		Lines []struct {
			Points string `xml:"points,attr"`
			Color  string `xml:"stroke,attr"`
			Dashed string `xml:"stroke-dasharray,attr"`
		} `xml:"polyline"`
	}
	require.NoError(t, xml.Unmarshal([]byte(out.String()), &doc))
	require.Len(t, doc.Lines, 3, "bbolt listed, etcd listed, etcd read-each; the warm run is not a line")
	points := strings.Fields(doc.Lines[0].Points)
	require.Len(t, points, 2)
	var x0, y0, x1, y1 float64
	_, err = fmt.Sscanf(points[0]+" "+points[1], "%f,%f %f,%f", &x0, &y0, &x1, &y1)
	require.NoError(t, err)
	require.Less(t, x0, x1, "1k left of 10k")
	require.Greater(t, y0, y1, "260 ms above 40 ms (SVG's y grows downwards)")
	require.Empty(t, doc.Lines[1].Dashed)
	require.NotEmpty(t, doc.Lines[2].Dashed)
	require.Contains(t, out.String(), ">1k<")
	require.Contains(t, out.String(), ">10k<")
	require.Contains(t, out.String(), ">1 s<")

	none, err := Parse(strings.NewReader("pkg: github.com/execfsm/execfsm/bench\nBenchmarkFire/lifecycle/execfsm-2 \t100\t15.00 ns/op\n"))
	require.NoError(t, err)
	require.ErrorIs(t, WriteRecoveryPlot(&strings.Builder{}, none), ErrNoRecovery)
}
