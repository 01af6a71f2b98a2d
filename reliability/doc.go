// Package reliability is execfsm's reliability suite: the tests that
// prove, the way the most trusted systems prove it, that no acknowledged
// transition is lost or applied twice under concurrency, crashes, etcd
// faults and hostile input. It has no API; see its tests.
//
//   - Linearizability: histories of concurrent Fire and CompareAndSwap
//     calls from goroutines and from several processes, on storage.Memory,
//     boltstore and etcdstore, checked with porcupine (package history).
//     A failing history is written as porcupine's HTML visualization to
//     $EXECFSM_ARTIFACTS (default: testdata/artifacts, not committed).
//   - Crashes: child processes SIGKILLed at random points, including
//     between a store write and its observers; after restart the store,
//     the audit trail and the controller's decisions agree.
//   - etcd faults: members and the whole cluster restarted under load, a
//     watch compacted under the recovery loop, a lease expiring while its
//     owner is stopped (SIGSTOP), fenced when it resumes (SIGCONT).
//   - Hostile input: one table of inputs, each with its clear error and
//     nothing written, on every store.
//   - Load: executions × transitions through the recovery loop on bbolt
//     and etcd; tests assert correctness, benchmarks report throughput
//     and p99 latency (BENCHMARKS.md).
//
// The fuzz targets of the other packages run briefly in CI; for a long
// run of one of them:
//
//	go test ./transition -run '^$' -fuzz '^FuzzRecordUnmarshalBinary$' -fuzztime 30m
package reliability
