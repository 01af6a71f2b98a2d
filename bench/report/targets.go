package report

import (
	"fmt"
	"strings"
)

// A target is one of the performance targets, as a ratio or a bound
// computed from the run's medians.
type target struct {
	item  string // where it comes from
	what  string
	want  string
	value func(*Run) (float64, bool)
	met   func(float64) bool
	unit  string // appended to the measured value
}

// targets are issue #17's, in its order, then issue #35's (numbered
// 35.n after its items), then #57's.
var targets = []target{
	{"1", "bbolt load throughput over etcd's (10k × 100 through the Loop, 32 workers)", "≥ 2×",
		ratio(metric("reliability", "BenchmarkLoad/bolt/", "transitions/s"), metric("reliability", "BenchmarkLoad/etcd/", "transitions/s")), atLeast(2), "×"},
	{"1", "bbolt load p99 over etcd's", "≤ 1×",
		ratio(metric("reliability", "BenchmarkLoad/bolt/", "p99-µs"), metric("reliability", "BenchmarkLoad/etcd/", "p99-µs")), atMost(1), "×"},
	{"1", "a lone bbolt writer's writes/s through the store over bare bbolt puts, one transaction each (no batching delay, no slower than a write per transaction)", "≥ 1×",
		metric("boltstore", "BenchmarkConcurrentWriters/1", "x-one-tx-each"), atLeast(1), "×"},
	{"1", "32 bbolt writers' writes/s through the store (group commit on the log) over bare puts, one transaction each", "faster",
		metric("boltstore", "BenchmarkConcurrentWriters/32", "x-one-tx-each"), atLeast(1), "×"},
	{"2", "Persisted.Fire on bbolt over the store's raw write (the same record in one log frame, appended and fdatasynced by hand): medians, random order", "≤ 1.10×",
		metric("boltstore", "BenchmarkPersistedFire", "x-raw"), atMost(1.10), "×"},
	{"2", "the same, ratio of means", "—",
		metric("boltstore", "BenchmarkPersistedFire", "x-raw-mean"), nil, "×"},
	{"2", "the control: the raw write to a second log file over the first (what the disk alone puts between two identical writes), medians", "—",
		metric("boltstore", "BenchmarkPersistedFire", "x-twin"), nil, "×"},
	{"2", "the control, ratio of means", "—",
		metric("boltstore", "BenchmarkPersistedFire", "x-twin-mean"), nil, "×"},
	{"2", "Persisted.Fire on bbolt over a raw bbolt transaction doing the same compare-and-swap (the store's write before its log)", "—",
		metric("boltstore", "BenchmarkPersistedFire", "x-bbolt"), nil, "×"},
	{"2", "Persisted.Fire on etcd over the store's own request sent raw (its Txn, keys, reads on a failure and deadline, the value prepared): medians, random order", "≤ 1.10×",
		metric("etcdstore", "BenchmarkPersistedFire", "x-raw"), atMost(1.10), "×"},
	{"2", "the same, ratio of means", "—",
		metric("etcdstore", "BenchmarkPersistedFire", "x-raw-mean"), nil, "×"},
	{"2", "Persisted.Fire on storage.Memory", "≤ 1 µs",
		metric("transition", "BenchmarkPersistedFireMemoryStore", "ns/op"), atMost(1000), " ns"},
	{"3", "Machine.Fire against looplab/fsm on the lifecycle", "≥ 30×",
		ratio(metric("bench", "BenchmarkFire/lifecycle/looplab", "ns/op"), metric("bench", "BenchmarkFire/lifecycle/execfsm", "ns/op")), atLeast(30), "×"},
	{"3", "Machine.Fire allocations", "0",
		metric("bench", "BenchmarkFire/lifecycle/execfsm", "allocs/op"), atMost(0), ""},
	{"3", "Machine.Fire over one bare compare-and-swap (the floor)", "—",
		ratio(metric("bench", "BenchmarkFire/lifecycle/execfsm", "ns/op"), metric("bench", "BenchmarkFire/lifecycle/bare-cas", "ns/op")), nil, "×"},
	{"4", "Loop against client-go's workqueue, 100k distinct keys, 1 worker", "—",
		queueRatio("distinct", 1), nil, "×"},
	{"4", "Loop against client-go's workqueue, 100k distinct keys, 4 workers", "≥ 2×",
		queueRatio("distinct", 4), atLeast(2), "×"},
	{"4", "Loop against client-go's workqueue, 100k adds over 1k keys, 1 worker", "—",
		queueRatio("hot", 1), nil, "×"},
	{"4", "Loop against client-go's workqueue, 100k adds over 1k keys, 4 workers", "≥ 2×",
		queueRatio("hot", 4), atLeast(2), "×"},
	{"4", "the same, client-go's time per reconcile over the Loop's (with hot keys each queue coalesces its own share of adds)", "—",
		metric("bench", "BenchmarkQueue/hot/workers=4", "x-client-go-per-reconcile"), nil, "×"},
	{"4", "Loop's heap per queued key over client-go's", "≤ 1×",
		ratio(metric("bench", "BenchmarkQueueMemory/lib=execfsm", "B/key"), metric("bench", "BenchmarkQueueMemory/lib=client-go", "B/key")), atMost(1), "×"},
	{"5", "recovery over 1k executions on bbolt (process start to recovered, listed records handed over)", "—",
		metric("reliability", "BenchmarkRecovery/bolt/1000/listed", "ms"), nil, " ms"},
	{"5", "recovery over 10k executions on bbolt", "≤ 1 s",
		metric("reliability", "BenchmarkRecovery/bolt/10000/listed", "ms"), atMost(1000), " ms"},
	{"5", "recovery over 1k executions on etcd", "—",
		metric("reliability", "BenchmarkRecovery/etcd/1000/listed", "ms"), nil, " ms"},
	{"5", "recovery over 10k executions on etcd", "≤ 2 s",
		metric("reliability", "BenchmarkRecovery/etcd/10000/listed", "ms"), atMost(2000), " ms"},
	{"35.1", "recovery over 100k executions on bbolt", "≤ 1 s",
		metric("reliability", "BenchmarkRecovery/bolt/100000/listed", "ms"), atMost(1000), " ms"},
	{"35.1", "the same in a process whose memory is already touched once (this machine's first touches taken out)", "—",
		metric("reliability", "BenchmarkRecovery/bolt/100000/listed-memory-warm", "ms"), nil, " ms"},
	{"35.1", "the same after a SIGKILL that left a full write-ahead log to replay", "—",
		metric("reliability", "BenchmarkRecovery/bolt/100000/listed-after-sigkill", "ms"), nil, " ms"},
	{"35.1", "recovery over 100k executions on etcd", "≤ 4 s",
		metric("reliability", "BenchmarkRecovery/etcd/100000/listed", "ms"), atMost(4000), " ms"},
	{"35.1", "recovery over 100k executions on etcd, each record read again (no Observe)", "—",
		metric("reliability", "BenchmarkRecovery/etcd/100000/read-each", "ms"), nil, " ms"},
	{"35.1", "recovery over 1M executions on bbolt", "—",
		metric("reliability", "BenchmarkRecovery/bolt/1000000/listed", "ms"), nil, " ms"},
	{"35.1", "this machine's first touch of memory, per MiB (a second touch: below)", "—",
		metric("reliability", "BenchmarkFirstTouch/fresh", "ns/MiB"), nil, " ns"},
	{"35.1", "a second touch of the same memory, per MiB", "—",
		metric("reliability", "BenchmarkFirstTouch/again", "ns/MiB"), nil, " ns"},
	{"35.2", "Kubernetes store: load throughput over etcd's (the same load, 1k × 20 through the Loop, 32 workers, both runs side by side)", "—",
		ratio(metric("reliability", "BenchmarkLoadKube/kube/", "transitions/s"), metric("reliability", "BenchmarkLoadKube/etcd/", "transitions/s")), nil, "×"},
	{"35.2", "Kubernetes store: load throughput", "—",
		metric("reliability", "BenchmarkLoadKube/kube/", "transitions/s"), nil, "/s"},
	{"35.2", "Kubernetes store: load p99 over etcd's", "—",
		ratio(metric("reliability", "BenchmarkLoadKube/kube/", "p99-µs"), metric("reliability", "BenchmarkLoadKube/etcd/", "p99-µs")), nil, "×"},
	{"35.2", "Persisted.Fire on the Kubernetes store over the raw ConfigMap update it makes (the same bytes, on the resourceVersion)", "≤ 1.10×",
		metric("kube", "BenchmarkPersistedFire", "x-raw"), atMost(1.10), "×"},
	{"57", "Kubernetes store over a custom resource: load throughput (the same load, records in the status of a CRD's resources)", "—",
		metric("reliability", "BenchmarkLoadKube/kuberesource/", "transitions/s"), nil, "/s"},
	{"57", "Kubernetes store over a custom resource: load throughput over the ConfigMap store's", "—",
		ratio(metric("reliability", "BenchmarkLoadKube/kuberesource/", "transitions/s"), metric("reliability", "BenchmarkLoadKube/kube/", "transitions/s")), nil, "×"},
	{"57", "Kubernetes store over a custom resource: load p99 over the ConfigMap store's", "—",
		ratio(metric("reliability", "BenchmarkLoadKube/kuberesource/", "p99-µs"), metric("reliability", "BenchmarkLoadKube/kube/", "p99-µs")), nil, "×"},
	{"57", "Persisted.Fire on the Kubernetes store over a custom resource over the raw status merge patch it makes (the same status, on the resourceVersion)", "≤ 1.10×",
		metric("kube", "BenchmarkResourcePersistedFire", "x-raw"), atMost(1.10), "×"},
	{"35.2", "recovery over 10k executions on the Kubernetes store (ConfigMaps listed in pages of 500)", "—",
		metric("reliability", "BenchmarkRecovery/kube/10000/listed", "ms"), nil, " ms"},
	{"35.3", "live heap per execution at 100k (records, handles, Loop keys) over the encoded record", "≤ 2×",
		ratio(metric("reliability", "BenchmarkRecovery/bolt/100000/listed", "heap-B/execution"), metric("reliability", "BenchmarkRecovery/bolt/100000/listed", "encoded-B/execution")), atMost(2), "×"},
	{"35.3", "the same at 1M", "≤ 2×",
		ratio(metric("reliability", "BenchmarkRecovery/bolt/1000000/listed", "heap-B/execution"), metric("reliability", "BenchmarkRecovery/bolt/1000000/listed", "encoded-B/execution")), atMost(2), "×"},
	{"56", "a controller restarted over 1M ended and 10k live executions on bbolt, listing the live statuses only, its file's pages verified in the background (process start to back in line)", "≤ 200 ms",
		metricEnding("reliability", "BenchmarkRecoveryLive/bolt/", "/verify-in-background", "ms"), atMost(200), " ms"},
	{"56", "the same, every page verified at Open (the default)", "—",
		metricEnding("reliability", "BenchmarkRecoveryLive/bolt/", "/verify-at-open", "ms"), nil, " ms"},
	{"56", "the same on etcd", "≤ 1 s",
		metric("reliability", "BenchmarkRecoveryLive/etcd/", "ms"), atMost(1000), " ms"},
	{"56", "the admin handler's first page over that bbolt store (the live statuses counted, a page of records)", "≤ 20 ms",
		metricEnding("reliability", "BenchmarkRecoveryLive/bolt/", "/verify-in-background", "admin-first-page-ms"), atMost(20), " ms"},
	{"56", "the same on etcd", "—",
		metric("reliability", "BenchmarkRecoveryLive/etcd/", "admin-first-page-ms"), nil, " ms"},
	{"56", "the load (10k × 100 on bbolt) beside a Retirer deleting 1M ended executions, over the same load alone", "≥ 0.90×",
		metric("reliability", "BenchmarkRetireBesideLoad/bolt/", "x-load-beside-retirer"), atLeast(0.90), "×"},
	{"56", "the Retirer's deletes meanwhile (batches of 100, 25 ms apart)", "—",
		metric("reliability", "BenchmarkRetireBesideLoad/bolt/", "retired/s"), nil, "/s"},
	{"56", "a backup of a bbolt store of 1M ended executions taken while the load (10k × 100) runs, found equal record by record to the store at its revision (DB.Backup)", "—",
		metric("reliability", "BenchmarkBackupUnderLoad/bolt/", "backup-ms"), nil, " ms"},
	{"56", "a controller opening that backup and recovering its 10k live executions (process start to back in line)", "—",
		metric("reliability", "BenchmarkBackupUnderLoad/bolt/", "recovered-ms"), nil, " ms"},
	{"56", "the same on etcd: the snapshot under the load (etcdstore.Snapshot)", "—",
		metric("reliability", "BenchmarkBackupUnderLoad/etcd/", "backup-ms"), nil, " ms"},
	{"56", "a new etcd cluster started from that snapshot", "—",
		metric("reliability", "BenchmarkBackupUnderLoad/etcd/", "restore-ms"), nil, " ms"},
	{"56", "a controller recovering its 10k live executions from the restored cluster", "—",
		metric("reliability", "BenchmarkBackupUnderLoad/etcd/", "recovered-ms"), nil, " ms"},
}

// metric is the median of unit in the first result of pkg whose name is
// name, or starts with it when name ends in a slash.
func metric(pkg, name, unit string) func(*Run) (float64, bool) {
	return func(run *Run) (float64, bool) {
		for _, r := range run.Results {
			if r.Package != pkg || (r.Name != name && !(strings.HasSuffix(name, "/") && strings.HasPrefix(r.Name, name))) {
				continue
			}
			return r.Median(unit)
		}
		return 0, false
	}
}

// metricEnding is metric of the first result whose name starts with
// prefix and ends with suffix (a size between them that the run's
// environment chose).
func metricEnding(pkg, prefix, suffix, unit string) func(*Run) (float64, bool) {
	return func(run *Run) (float64, bool) {
		for _, r := range run.Results {
			if r.Package == pkg && strings.HasPrefix(r.Name, prefix) && strings.HasSuffix(r.Name, suffix) {
				return r.Median(unit)
			}
		}
		return 0, false
	}
}

func ratio(num, den func(*Run) (float64, bool)) func(*Run) (float64, bool) {
	return func(run *Run) (float64, bool) {
		n, ok1 := num(run)
		d, ok2 := den(run)
		if !ok1 || !ok2 || d == 0 {
			return 0, false
		}
		return n / d, true
	}
}

// queueRatio is client-go's time per add over the Loop's, measured in
// pairs by the benchmark.
func queueRatio(shape string, workers int) func(*Run) (float64, bool) {
	return metric("bench", fmt.Sprintf("BenchmarkQueue/%s/workers=%d", shape, workers), "x-client-go")
}

func atLeast(min float64) func(float64) bool { return func(v float64) bool { return v >= min } }
func atMost(max float64) func(float64) bool  { return func(v float64) bool { return v <= max } }

// writeTargets renders the targets the run measured, with whether each
// is met. Why one is not is in the notes that follow the table
// (bench/notes.md, added by bench/run.sh).
func writeTargets(b *strings.Builder, run *Run) {
	var rows []string
	for _, t := range targets {
		v, ok := t.value(run)
		if !ok {
			continue
		}
		verdict := "—"
		if t.met != nil {
			verdict = "not met"
			if t.met(v) {
				verdict = "met"
			}
		}
		shown := num(v)
		if t.unit == "×" {
			shown = fmt.Sprintf("%.2f", v)
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s%s | %s |", t.item, t.what, t.want, shown, t.unit, verdict))
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("\n## Targets\n\nIssue #17's targets (items 1 to 5), issue #35's (35.n) and issue #56's, each computed from the medians below; \"—\" is a figure shown for scale.\n\n" +
		"| item | measure | target | measured | |\n| --- | --- | --- | ---: | --- |\n")
	b.WriteString(strings.Join(rows, "\n") + "\n")
}
