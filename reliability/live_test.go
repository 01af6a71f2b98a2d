package reliability_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/execfsm/execfsm/admin"
	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/stretchr/testify/require"
)

// livePage is how many records a live-only recovery asks for at a time,
// as run.Manage and reconcile.StoreKeys do.
const livePage = 1000

// BenchmarkRecoveryLive is BenchmarkRecovery over a store that has run
// for years: EXECFSM_RECOVERY_ENDED ended executions (default 1000000
// on bbolt and etcd) beside EXECFSM_RECOVERY_LIVE live ones (default
// 10000), the adoption pass listing the live statuses only, a page at a
// time, on bbolt both with its pages verified at Open and in the
// background (boltstore.Options.VerifyInBackground). It reports what
// BenchmarkRecovery does, and admin-first-page-ms:
// the admin handler's list page (the live statuses counted, the first
// page of records) served over HTTP, the median of five, once the
// controller is back in line.
//
//	EXECFSM_RECOVERY_ENDED=100000 go test ./reliability -run '^$' -bench RecoveryLive -benchtime 1x
func BenchmarkRecoveryLive(b *testing.B) {
	ended, live := envCount(b, "EXECFSM_RECOVERY_ENDED", 1_000_000), envCount(b, "EXECFSM_RECOVERY_LIVE", 10_000)
	for _, backend := range []string{"bolt", "etcd"} {
		// Made once, outside the sub-benchmark: the testing package calls
		// it again for each b.N it tries (1, then the -benchtime count),
		// and a second million records would not fit etcd's quota. The
		// restarts write nothing, so each finds the store as made.
		spec := liveRecoveryOver(b, backend, ended, live)
		made := spec
		b.Run(fmt.Sprintf("%s/%d-ended/%d-live", backend, ended, live), func(b *testing.B) {
			spec := made // each call from the store as made
			if backend != "bolt" {
				benchmarkRecoveryChild(b, spec, live, nil)
				return
			}
			// bbolt verifies every page of the file at Open, ended
			// records' too, unless told to do it in the background.
			b.Run("verify-at-open", func(b *testing.B) { benchmarkRecoveryChild(b, spec, live, nil) })
			spec.VerifyInBackground = true
			b.Run("verify-in-background", func(b *testing.B) { benchmarkRecoveryChild(b, spec, live, nil) })
		})
	}
}

// envCount reads a positive count from the environment, or fallback.
func envCount(b *testing.B, name string, fallback int) int {
	raw := os.Getenv(name)
	if raw == "" {
		return fallback
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive count", name, raw)
	}
	return n
}

// liveRecoveryOver makes ended completed executions and live running
// ones in a fresh store of backend, with the table recorded (the admin
// handler counts by it), and returns the spec of a child recovering
// over the live ones.
func liveRecoveryOver(b *testing.B, backend string, ended, live int) childSpec {
	spec := childSpec{Role: "recover", LiveOnly: true}
	var store storage.Store
	var done func()
	switch backend {
	case "bolt":
		spec.BoltPath = filepath.Join(b.TempDir(), "db")
		db, err := boltstore.Open(spec.BoltPath, boltstore.Options{})
		require.NoError(b, err)
		s, err := db.Store("executions")
		require.NoError(b, err)
		store, done = s, func() { require.NoError(b, db.Close()) } // the child takes the file's lock
	case "etcd":
		s, prefix := etcdStore(b)
		spec.Prefix, spec.Etcd = prefix, shared.Endpoints()
		store, done = s, func() {}
	default:
		b.Fatalf("no store %q", backend)
	}
	_, err := schema.Save(context.Background(), store, "teraslice", teraslice.Roles())
	require.NoError(b, err)
	makeEnded(b, store, ended)
	makeExecutions(b, store, live)
	done()
	return spec
}

// makeEnded creates n completed executions, ended-%07d, 32 at a time,
// each with a short trail: what a fleet keeps of the work it ran.
func makeEnded(b testing.TB, store storage.Store, n int) {
	b.Helper()
	at := time.Date(2026, 11, 3, 12, 0, 0, 0, time.UTC)
	trail, err := storage.NewTrail(
		storage.Entry{To: "pending", Reason: "submitted", Actor: "master", At: at},
		storage.Entry{From: "pending", To: "running", Reason: "controller started", Actor: "controller-7f9c", Owner: "controller-7f9c", Epoch: 1, At: at, Revision: 1},
		storage.Entry{From: "running", To: "completed", Reason: "the work finished", Actor: "controller-7f9c", Owner: "controller-7f9c", Epoch: 1, At: at, Revision: 2},
	)
	require.NoError(b, err)
	createConcurrently(b, store, n, func(k int) storage.Record {
		return storage.Record{
			ID: fmt.Sprintf("ended-%07d", k), Status: "completed", Previous: "running", UpdatedAt: at, Since: at,
			Reason: "the work finished", History: trail, Owner: "controller-7f9c", Epoch: 1,
		}
	})
}

// adminFirstPage serves the admin handler over store and returns the
// median time of five requests of its list page.
func adminFirstPage(ctx context.Context, store storage.Store) (int64, error) {
	h, err := admin.NewHandler(store, admin.HandlerOptions{})
	if err != nil {
		return 0, err
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	var took []time.Duration
	for range 5 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/", nil)
		if err != nil {
			return 0, err
		}
		start := time.Now()
		resp, err := srv.Client().Do(req)
		if err != nil {
			return 0, err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("the admin's list page answered %s", resp.Status)
		}
		if err != nil {
			return 0, err
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	return int64(took[len(took)/2]), nil
}

// BenchmarkRetireBesideLoad is the Retirer deleting what a fleet ended
// while its controllers work: on bbolt, EXECFSM_RETIRE_ENDED completed
// executions (default 1000000), then the load of BenchmarkLoad
// (EXECFSM_LOAD, default 10000x100) alone, then the same load on a
// second store made alike with a Retirer (completed executions kept for
// no time, batches of 100 and a pause of 25 ms between them) running
// beside it. It reports the load's throughput each time, their
// ratio (x-load-beside-retirer: 1 is a retirer that costs the load
// nothing) and the records the Retirer deleted per second while the load
// ran.
//
//	EXECFSM_RETIRE_ENDED=100000 EXECFSM_LOAD=2000x50 go test ./reliability -run '^$' -bench RetireBesideLoad -benchtime 1x
func BenchmarkRetireBesideLoad(b *testing.B) {
	ended := envCount(b, "EXECFSM_RETIRE_ENDED", 1_000_000)
	executions, steps := loadSize(b)
	b.Run(fmt.Sprintf("bolt/%d-ended/%dx%d", ended, executions, steps), func(b *testing.B) {
		for i := range b.N {
			// Two stores alike, one for each load: the second load
			// meets a store of the same size, not one the first grew.
			first := boltStore(b)
			makeEnded(b, first, ended)
			alone := runLoad(b, first, fmt.Sprintf("alone-%d", i), executions, steps, 32)
			store := boltStore(b)
			makeEnded(b, store, ended)
			roles, err := teraslice.RolesBuilder().Retain(0, state.Completed).Build()
			require.NoError(b, err)
			d, err := recovery.NewDecider(roles, recovery.Policy{Work: recovery.AsRecorded})
			require.NoError(b, err)
			retirer, err := d.NewRetirer(store, recovery.RetirerOptions{Batch: 100, Pause: 25 * time.Millisecond})
			require.NoError(b, err)
			ctx, stop := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = retirer.Retire(ctx) // one pass: every ended execution is due
			}()
			start := time.Now()
			beside := runLoad(b, store, fmt.Sprintf("beside-%d", i), executions, steps, 32)
			during := time.Since(start)
			left, err := store.CountStatuses(context.Background(), state.Completed.String())
			require.NoError(b, err)
			n := ended - left[state.Completed.String()]
			stop()
			<-done
			a, c := float64(alone.transitions)/alone.elapsed.Seconds(), float64(beside.transitions)/beside.elapsed.Seconds()
			b.ReportMetric(a, "transitions/s-alone")
			b.ReportMetric(c, "transitions/s-beside-retirer")
			b.ReportMetric(c/a, "x-load-beside-retirer")
			b.ReportMetric(float64(n)/during.Seconds(), "retired/s")
			b.ReportMetric(float64(beside.p(0.99).Microseconds()), "p99-µs-beside-retirer")
			b.ReportMetric(float64(alone.p(0.99).Microseconds()), "p99-µs-alone")
		}
	})
}
