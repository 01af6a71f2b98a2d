package kube_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
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
	sideBySide(b, func(i int) {
		if _, err := exec.Fire(bg, targets[i&1], "toggle"); err != nil {
			b.Fatal(err)
		}
	}, func(i int) time.Duration {
		cm := states[i&1].DeepCopy()
		cm.ResourceVersion = rv
		t0 := time.Now()
		updated, err := configMaps.Update(bg, cm, metav1.UpdateOptions{})
		took := time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		rv = updated.ResourceVersion
		return took
	})
}

// sideBySide times fire against raw, b.N of each, which goes first
// alternating (as on etcd), and reports persisted-ns/op, raw-ns/op and
// x-raw, fire's time over raw's. raw times its own write and returns it,
// leaving out the work that prepares it.
func sideBySide(b *testing.B, fire func(i int), raw func(i int) time.Duration) {
	var persisted, rawTook time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	timedFire := func(i int) {
		t0 := time.Now()
		fire(i)
		persisted += time.Since(t0)
	}
	for i := range b.N {
		if i&1 == 0 {
			timedFire(i)
			rawTook += raw(i)
		} else {
			rawTook += raw(i)
			timedFire(i)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(persisted.Nanoseconds())/float64(b.N), "persisted-ns/op")
	b.ReportMetric(float64(rawTook.Nanoseconds())/float64(b.N), "raw-ns/op")
	b.ReportMetric(float64(persisted)/float64(rawTook), "x-raw")
}

// BenchmarkResourcePersistedFire is BenchmarkPersistedFire on the store
// over a custom resource (a SimJob, with conditions): a transition
// against the raw write it comes down to, a JSON merge patch of the
// resource's status subresource on its resourceVersion, by hand, with
// the same client and a status of the same bytes, on a resource of its
// own. It reports x-raw, Persisted's time over the raw patch's.
func BenchmarkResourcePersistedFire(b *testing.B) {
	s := newResourceStore(b)
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), s, "ex-1", transition.PersistedOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := exec.Create(bg, transition.To(state.Running)); err != nil {
		b.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(storeCfg)
	if err != nil {
		b.Fatal(err)
	}
	resources := dyn.Resource(simJobs).Namespace(s.Namespace())
	targets := [2]state.Status{state.Paused, state.Running}
	var statuses [2]map[string]any // the resource's status in each state
	for i := range 20 {            // fill the audit trail to its steady size
		if _, err := exec.Fire(bg, targets[i&1], "toggle"); err != nil {
			b.Fatal(err)
		}
		if i >= 18 {
			u, err := resources.Get(bg, "ex-1", metav1.GetOptions{})
			if err != nil {
				b.Fatal(err)
			}
			statuses[i&1] = u.Object["status"].(map[string]any)
		}
	}
	raw, err := templateOf(simJobs, "SimJob")("raw")
	if err != nil {
		b.Fatal(err)
	}
	if raw, err = resources.Create(bg, raw, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	rv := raw.GetResourceVersion()
	sideBySide(b, func(i int) {
		if _, err := exec.Fire(bg, targets[i&1], "toggle"); err != nil {
			b.Fatal(err)
		}
	}, func(i int) time.Duration {
		t0 := time.Now()
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": rv}, "status": statuses[i&1]})
		if err != nil {
			b.Fatal(err)
		}
		patched, err := resources.Patch(bg, "raw", types.MergePatchType, body, metav1.PatchOptions{}, "status")
		took := time.Since(t0)
		if err != nil {
			b.Fatal(err)
		}
		rv = patched.GetResourceVersion()
		return took
	})
}
