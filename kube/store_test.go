package kube_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/recovery/recoverytest"
	"github.com/execfsm/execfsm/schema/schematest"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

var bg = context.Background()

func newStore(t testing.TB) *kube.Store { t.Helper(); return newStoreIn(t, namespace(t)) }

func newStoreIn(t testing.TB, ns string) *kube.Store {
	t.Helper()
	s, err := kube.New(storeClient, kube.Options{Namespace: ns})
	require.NoError(t, err)
	return s
}

// suiteStores are the two places a store keeps its records, each a
// fresh store in a namespace of its own: ConfigMaps, and SimJobs (a
// custom resource of the user's, Options.Resource). Every suite runs
// over both.
var suiteStores = []struct {
	name string
	open func(testing.TB) *kube.Store
}{
	{"configmaps", newStore},
	{"simjobs", newResourceStore},
}

// forEachStore runs suite over each of suiteStores, in parallel.
func forEachStore(t *testing.T, suite func(t *testing.T, newStore func(t *testing.T) storage.Store)) {
	for _, kind := range suiteStores {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			suite(t, func(t *testing.T) storage.Store { return kind.open(t) })
		})
	}
}

// The suites run beside the tests that wait on the Job controller's
// backoffs (each in namespaces of its own): run one after the other, the
// package took three minutes.
func TestConformance(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, newStore func(t *testing.T) storage.Store) {
		storagetest.Run(t, newStore)
		storagetest.RunTable(t, newStore)
	})
}

// TestStartupOwnership runs the ownership suite with 150 rounds of the
// start race, not the default 500: a round here is a dozen requests
// through a race-instrumented client-go (160 ms, the test process
// bound by its CPU), and 500 took 81 s of every CI run. The race's
// outcome is decided by the API server's compare-and-swap on the Lease,
// which 150 rounds meet from both sides as often as 500 do on the other
// stores (the log of wins says so).
func TestStartupOwnership(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, newStore func(t *testing.T) storage.Store) {
		recoverytest.RunOwnership(t, newStore, recoverytest.Options{Rounds: 150})
	})
}

func TestNewRefusesBadOptions(t *testing.T) {
	for name, o := range map[string]kube.Options{
		"no namespace":     {},
		"bad namespace":    {Namespace: "Not_A_Namespace"},
		"prefix no dash":   {Namespace: "default", Prefix: "execfsm"},
		"prefix bad":       {Namespace: "default", Prefix: "Bad_Prefix-"},
		"negative timeout": {Namespace: "default", Timeout: -1},
	} {
		_, err := kube.New(clientset, o)
		require.Error(t, err, name)
	}
	_, err := kube.New(nil, kube.Options{Namespace: "default"})
	require.Error(t, err)
}

// Ids that are not valid Kubernetes names are hashed into one, and kept
// in an annotation; the status is mirrored in a label for kubectl.
func TestAnyIDFitsAConfigMapAndStatusIsALabel(t *testing.T) {
	s := newStore(t)
	for _, id := range []string{"ex-1", "Teraslice/Ex_ID 42", strings.Repeat("long", 60), "é"} {
		rec, err := s.Create(bg, storagetest.Sample(id))
		require.NoError(t, err, "%q", id)
		got, err := s.Get(bg, id)
		require.NoError(t, err)
		require.Equal(t, rec.Revision, got.Revision)
		cm, err := clientset.CoreV1().ConfigMaps(s.Namespace()).Get(bg, s.Name(id), metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, id, cm.Annotations[kube.IDAnnotation])
		require.Equal(t, "running", cm.Labels[kube.StatusLabel])
		require.LessOrEqual(t, len(cm.Name), 253)
	}
	require.Equal(t, "execfsm-ex-1", s.Name("ex-1"))
}

// kubectl get cm -o yaml shows the record as a person reads it: an
// indented JSON document, nothing binary.
func TestTheRecordIsReadableWithKubectl(t *testing.T) {
	s := newStore(t)
	_, err := s.Create(bg, storagetest.Sample("ex-1"))
	require.NoError(t, err)
	cm, err := clientset.CoreV1().ConfigMaps(s.Namespace()).Get(bg, s.Name("ex-1"), metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, cm.BinaryData)
	text := cm.Data[kube.RecordKey]
	require.Contains(t, text, "\n  \"status\": \"running\",\n", "one field a line")
	require.Contains(t, text, `"history": [`)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(text), &doc), "jq reads it")
}

// ConfigMaps written before the record was text are still read, and
// written as text.
func TestARecordStoredAsBinaryIsStillRead(t *testing.T) {
	s := newStore(t)
	rec := storagetest.Sample("ex-1")
	data, err := rec.MarshalBinary()
	require.NoError(t, err)
	_, err = clientset.CoreV1().ConfigMaps(s.Namespace()).Create(bg, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name("ex-1"), Labels: map[string]string{kube.ManagedLabel: "execfsm"},
			Annotations: map[string]string{kube.IDAnnotation: "ex-1"}},
		BinaryData: map[string][]byte{"record": data},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	got, err := s.Get(bg, "ex-1")
	require.NoError(t, err)
	require.Equal(t, rec.Status, got.Status)
	next := got.Clone()
	next.Reason = "rewritten"
	_, err = s.CompareAndSwap(bg, "ex-1", got.Revision, next)
	require.NoError(t, err)
	cm, err := clientset.CoreV1().ConfigMaps(s.Namespace()).Get(bg, s.Name("ex-1"), metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, cm.BinaryData)
	require.Contains(t, cm.Data[kube.RecordKey], `"reason": "rewritten"`)
}

// A record too large for a ConfigMap is refused before any request, with
// what to do about it.
func TestARecordTooLargeForAConfigMapIsRefused(t *testing.T) {
	s := newStore(t)
	rec := storagetest.Sample("ex-1")
	rec.Meta = map[string]string{}
	for k := range storage.MaxMetaEntries {
		rec.Meta[fmt.Sprintf("k%02d", k)] = strings.Repeat("x", storage.MaxMetaValueLen)
	}
	_, err := s.Create(bg, rec) // 64 × 4 KB of metadata: 256 KB, fits
	require.NoError(t, err)
	big := storagetest.Sample("ex-2")
	big.HistoryLimit = storage.MaxHistory
	var entries []storage.Entry
	at := big.UpdatedAt.Add(-time.Hour)
	for k := range storage.MaxHistory {
		entries = append(entries, storage.Entry{From: "running", To: "paused", Reason: strings.Repeat("r", storage.MaxReasonLen), At: at, Revision: uint64(k + 1)})
	}
	big.History, err = storage.NewTrail(entries...)
	require.NoError(t, err)
	big.Revision = storage.MaxHistory + 1
	_, err = s.Create(bg, big) // 256 reasons of 8 KB: 2 MB
	require.ErrorIs(t, err, storage.ErrInvalidRecord)
	require.ErrorContains(t, err, "over a ConfigMap's 1048576")
}

// The relocatable flag recorded on an execution is a label beside the
// status label, kept as the record changes, and gone when the record no
// longer says.
func TestRelocatableFlagIsALabel(t *testing.T) {
	s := newStore(t)
	label := func() (string, bool) {
		cm, err := clientset.CoreV1().ConfigMaps(s.Namespace()).Get(bg, s.Name("ex-1"), metav1.GetOptions{})
		require.NoError(t, err)
		v, ok := cm.Labels[kube.RelocatableLabel]
		return v, ok
	}
	rec := storagetest.Sample("ex-1")
	rec.Meta = map[string]string{recovery.MetaRelocatable: "true"}
	rec, err := s.Create(bg, rec)
	require.NoError(t, err)
	v, ok := label()
	require.True(t, ok)
	require.Equal(t, "true", v)
	for _, flag := range []string{"false", "maybe"} {
		next := rec.Clone()
		next.Meta[recovery.MetaRelocatable] = flag
		rec, err = s.CompareAndSwap(bg, "ex-1", rec.Revision, next)
		require.NoError(t, err)
	}
	_, ok = label()
	require.False(t, ok, "a flag that is neither true nor false is no label")
	next := rec.Clone()
	next.Meta[recovery.MetaRelocatable] = "false"
	_, err = s.CompareAndSwap(bg, "ex-1", rec.Revision, next)
	require.NoError(t, err)
	v, _ = label()
	require.Equal(t, "false", v)
	selected, err := clientset.CoreV1().ConfigMaps(s.Namespace()).List(bg, metav1.ListOptions{LabelSelector: kube.RelocatableLabel + "=false"})
	require.NoError(t, err)
	require.Len(t, selected.Items, 1, "drain tooling selects the controllers that cannot move")
}

// A stale update gets 409 Conflict from the API server, which the store
// turns into a ConflictError carrying the current record.
func TestStaleResourceVersionIsAConflictWithTheCurrentRecord(t *testing.T) {
	s := newStore(t)
	rec, err := s.Create(bg, storagetest.Sample("ex-1"))
	require.NoError(t, err)
	next := rec.Clone()
	next.Status = "paused"
	written, err := s.CompareAndSwap(bg, "ex-1", rec.Revision, next)
	require.NoError(t, err)
	_, err = s.CompareAndSwap(bg, "ex-1", rec.Revision, next)
	var conflict *storage.ConflictError
	require.ErrorAs(t, err, &conflict)
	require.Equal(t, written.Revision, conflict.Current.Revision)
	require.Equal(t, "paused", conflict.Current.Status)
}

func TestPersistedLifecycleOnKubernetes(t *testing.T) {
	s := newStore(t)
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), s, "ex-1", transition.PersistedOptions{})
	require.NoError(t, err)
	_, err = exec.Create(bg, transition.To(state.Pending))
	require.NoError(t, err)
	for _, to := range []state.Status{state.Scheduling, state.Initializing, state.Running, state.Relocating, state.Running} {
		_, err := exec.Fire(bg, to, "step")
		require.NoError(t, err)
	}
	_, err = exec.Fire(bg, state.Pending, "rewind")
	require.ErrorIs(t, err, transition.ErrNotAllowed)
}

// A watch from a resourceVersion the API server no longer has answers
// 410 Gone; the store re-lists and goes on, so the writes are all seen.
func TestWatchFromAnExpiredVersionReListsAndMissesNothing(t *testing.T) {
	s := newStore(t)
	first, err := s.Create(bg, storagetest.Sample("ex-0"))
	require.NoError(t, err)
	for k := 1; k < 5; k++ {
		_, err := s.Create(bg, storagetest.Sample(fmt.Sprintf("ex-%d", k)))
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	// Wait until the API server has compacted the first write away:
	// asked directly, a watch from it then answers 410 Gone, the case
	// the store must handle.
	gone := func() bool {
		w, err := clientset.CoreV1().ConfigMaps(s.Namespace()).Watch(ctx, metav1.ListOptions{ResourceVersion: fmt.Sprint(first.Revision)})
		if err != nil {
			return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
		}
		defer w.Stop()
		ev := recv(t, w.ResultChan(), "the watch's first event")
		status, ok := ev.Object.(*metav1.Status)
		return ev.Type == watch.Error && ok && status.Code == http.StatusGone
	}
	require.Eventually(t, gone, 60*time.Second, 200*time.Millisecond, "the API server never compacted")
	ch, err := s.Watch(ctx, first.Revision)
	require.NoError(t, err)
	seen := map[string]bool{}
	for len(seen) < 5 {
		select {
		case ev := <-ch:
			seen[ev.ID] = true
		case <-time.After(30 * time.Second):
			t.Fatalf("saw %v after the expired watch", seen)
		}
	}
	rec, err := s.Create(bg, storagetest.Sample("ex-new"))
	require.NoError(t, err)
	for {
		select {
		case ev := <-ch:
			if ev.ID == "ex-new" {
				require.Equal(t, rec.Revision, ev.Revision)
				require.Greater(t, ev.Revision, first.Revision)
				return
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no event for a write after the re-list")
		}
	}
}

// A ConfigMap whose record does not decode (edited by hand, written by a
// newer version) is listed apart; the other records are listed as usual,
// and it is never overwritten by a stale write.
func TestAnUnreadableRecordIsListedApartAndLeftAlone(t *testing.T) {
	s := newStore(t)
	for _, id := range []string{"ex-1", "ex-2", "ex-3"} {
		_, err := s.Create(bg, storagetest.Sample(id))
		require.NoError(t, err)
	}
	stale, err := s.Get(bg, "ex-2")
	require.NoError(t, err)
	cms := clientset.CoreV1().ConfigMaps(s.Namespace())
	cm, err := cms.Get(bg, s.Name("ex-2"), metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data[kube.RecordKey] = `{"id":"ex-2","written_by":"a newer version"}`
	_, err = cms.Update(bg, cm, metav1.UpdateOptions{})
	require.NoError(t, err)

	recs, bad, err := s.List(bg)
	require.NoError(t, err, "one unreadable record does not fail the list")
	require.Len(t, recs, 2)
	require.Equal(t, []string{"ex-1", "ex-3"}, []string{recs[0].ID, recs[1].ID})
	require.Len(t, bad, 1)
	require.Equal(t, "ex-2", bad[0].ID)
	require.ErrorIs(t, bad[0].Err, storage.ErrCorrupt)
	_, err = s.CompareAndSwap(bg, "ex-2", stale.Revision, stale)
	require.ErrorIs(t, err, storage.ErrCorrupt)
}

// recv receives one value from ch, or fails the test naming what it
// waited for: a regression is a named failure, not a hung test binary.
func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("%s: the channel was closed", what)
		}
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: nothing came within 20s", what)
	}
	var zero T
	return zero
}

// A zero Store says to use New instead of panicking on its nil client.
func TestZeroStoreFailsWithAnError(t *testing.T) {
	storagetest.Unusable(t, &kube.Store{}, "New")
}

func TestTableCompatibility(t *testing.T) {
	forEachStore(t, schematest.Run)
}

// List reads a store of more records than one page holds in pages
// (three requests for three pages), every record once, in id order,
// and reports a record that does not decode apart wherever it falls.
func TestListPagesThroughManyRecords(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	s := newStoreIn(t, ns)
	n := 2*kube.ListPageSize + 45   // three pages, the last one short
	broken := kube.ListPageSize + 7 // in the middle page
	ids := make([]string, n)
	for k := range ids {
		ids[k] = fmt.Sprintf("ex-%05d", k)
	}
	storagetest.CreateSamples(t, s, ids...)
	cms := clientset.CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(bg, s.Name(fmt.Sprintf("ex-%05d", broken)), metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data[kube.RecordKey] = `{"not":"a record"}`
	_, err = cms.Update(bg, cm, metav1.UpdateOptions{})
	require.NoError(t, err)

	var seen attempts
	lister, err := kube.New(seen.client(t, storeCfg), kube.Options{Namespace: ns})
	require.NoError(t, err)
	recs, bad, err := lister.List(bg)
	require.NoError(t, err)
	// Three pages, or (when the API server compacted the listing's
	// revision between two pages) those it served and one full list.
	require.GreaterOrEqual(t, seen.count(), 3, "one request a page")
	require.Len(t, recs, n-1)
	require.Len(t, bad, 1)
	require.Equal(t, fmt.Sprintf("ex-%05d", broken), bad[0].ID)
	for k, rec := range recs {
		want := k
		if k >= broken {
			want++
		}
		require.Equal(t, fmt.Sprintf("ex-%05d", want), rec.ID)
	}
}
