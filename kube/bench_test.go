package kube_test

import (
	"testing"
	"time"

	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkPersistedFire is a transition written to the kube store
// against the raw write it comes down to: an update of the record's
// ConfigMap on its resourceVersion, by hand, with the same client and
// the same bytes (the record's two states taking turns, so each update
// writes). Which of the two goes first alternates, as on etcd. It
// reports x-raw, Persisted's time over the raw update's.
func BenchmarkPersistedFire(b *testing.B) {
	s := newStore(b)
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), s, "ex-1", transition.PersistedOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := exec.Create(bg, transition.To(state.Running)); err != nil {
		b.Fatal(err)
	}
	targets := [2]state.Status{state.Paused, state.Running}
	configMaps := storeClient.CoreV1().ConfigMaps(s.Namespace())
	var states [2]*corev1.ConfigMap // the record's ConfigMap in each state, renamed
	for i := range 20 {             // fill the audit trail to its steady size
		if _, err := exec.Fire(bg, targets[i&1], "toggle"); err != nil {
			b.Fatal(err)
		}
		if i >= 18 {
			cm, err := configMaps.Get(bg, s.Name("ex-1"), metav1.GetOptions{})
			if err != nil {
				b.Fatal(err)
			}
			states[i&1] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "raw", Namespace: cm.Namespace,
				Labels: map[string]string{"raw": "true"}, Annotations: cm.Annotations}, Data: cm.Data, BinaryData: cm.BinaryData}
		}
	}
	raw, err := configMaps.Create(bg, states[1], metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	rv := raw.ResourceVersion
	var persisted, rawTook time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	fire := func(i int) {
		t0 := time.Now()
		if _, err := exec.Fire(bg, targets[i&1], "toggle"); err != nil {
			b.Fatal(err)
		}
		persisted += time.Since(t0)
	}
	update := func(i int) {
		cm := states[i&1].DeepCopy()
		cm.ResourceVersion = rv
		t0 := time.Now()
		updated, err := configMaps.Update(bg, cm, metav1.UpdateOptions{})
		rawTook += time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		rv = updated.ResourceVersion
	}
	for i := range b.N {
		if i&1 == 0 {
			fire(i)
			update(i)
		} else {
			update(i)
			fire(i)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(persisted.Nanoseconds())/float64(b.N), "persisted-ns/op")
	b.ReportMetric(float64(rawTook.Nanoseconds())/float64(b.N), "raw-ns/op")
	b.ReportMetric(float64(persisted)/float64(rawTook), "x-raw")
}
