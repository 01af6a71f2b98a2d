// Package kubelin runs the reliability suite's linearizability histories
// against kube.Store on a real kube-apiserver: moves, raw
// compare-and-swaps, and ownership through coordination/v1 Leases. It is
// its own package because it needs a control plane the rest of the suite
// does not.
package kubelin_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/kube/kubetest"
	"github.com/execfsm/execfsm/reliability/history"
	"github.com/execfsm/execfsm/reliability/workload"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

var (
	clientset    *kubernetes.Clientset // the administrator's: it makes namespaces
	storeClient  *kubernetes.Clientset // the stores': bound to the master's and the controller's Roles only
	controlPlane *kubetest.ControlPlane
)

// storeUser is the user the stores run as.
const storeUser = "execfsm-kubelin"

// TestMain starts a real kube-apiserver and etcd (see kube/kubetest).
// Without them every test fails, saying why.
func TestMain(m *testing.M) {
	os.Exit(kubetest.Main(m, kubetest.Options{LeakCheck: true}, func(cp *kubetest.ControlPlane) {
		clientset, controlPlane = cp.Clientset, cp
		cfg, err := cp.AddUser(storeUser)
		if err != nil {
			panic(err)
		}
		storeClient = kubernetes.NewForConfigOrDie(cfg)
	}))
}

var namespaces atomic.Int64

// newStore returns a kube.Store in a fresh namespace.
func newStore(t *testing.T) *kube.Store {
	t.Helper()
	name := fmt.Sprintf("lin%d-%d", os.Getpid(), namespaces.Add(1))
	_, err := clientset.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, controlPlane.Grant(ctx, storeUser, kube.MasterRole(name)))
	require.NoError(t, controlPlane.Grant(ctx, storeUser, kube.ControllerRole(name)))
	s, err := kube.New(storeClient, kube.Options{Namespace: name})
	require.NoError(t, err)
	return s
}

func artifacts() string {
	if d := os.Getenv("EXECFSM_ARTIFACTS"); d != "" {
		return d
	}
	return filepath.Join("testdata", "artifacts")
}

const checkTimeout = 2 * time.Minute

func concurrently(t *testing.T, clients int, body func(client int, emit func(history.Op)) error) []history.Op {
	t.Helper()
	ops, err := workload.Concurrently(clients, body)
	require.NoError(t, err)
	return ops
}

func TestFireIsLinearizableOnKube(t *testing.T) {
	store := newStore(t)
	execs := workload.IDs("fire", 3)
	_, err := workload.CreateAll(context.Background(), store, execs)
	require.NoError(t, err)
	ops := concurrently(t, 5, func(c int, emit func(history.Op)) error {
		return workload.Fire(context.Background(), store, c, execs, 40, 7, emit)
	})
	require.NoError(t, history.Check(history.FireModel(teraslice.Lifecycle()), ops, artifacts(), "fire-kube", checkTimeout))
	changed := 0
	for _, op := range ops {
		if op.Outcome == history.Changed {
			changed++
		}
	}
	require.Greater(t, changed, len(ops)/20, "the history moved executions, not only refusals")
}

func TestStoreCompareAndSwapIsLinearizableOnKube(t *testing.T) {
	store := newStore(t)
	keys := workload.IDs("cas", 3)
	revs := map[string]uint64{}
	for _, id := range keys {
		rec, err := store.Create(context.Background(), storage.Record{ID: id, Status: "a"})
		require.NoError(t, err)
		revs[id] = rec.Revision
	}
	ops := concurrently(t, 5, func(c int, emit func(history.Op)) error {
		return workload.CAS(context.Background(), store, c, keys, 30, 8, emit)
	})
	require.NoError(t, history.Check(history.CASModel(revs, "a"), ops, artifacts(), "cas-kube", checkTimeout))
}

// Controllers take executions over through their Leases, move them and
// let them go while others are refused or write as outside authorities.
func TestOwnershipIsLinearizableOnKube(t *testing.T) {
	store := newStore(t)
	execs := workload.IDs("own", 2)
	_, err := workload.CreateAll(context.Background(), store, execs)
	require.NoError(t, err)
	ops := concurrently(t, 4, func(c int, emit func(history.Op)) error {
		return workload.Ownership(context.Background(), store, c, execs, 25, 9, emit)
	})
	require.NoError(t, history.Check(history.OwnershipModel(teraslice.Lifecycle()), ops, artifacts(), "ownership-kube", checkTimeout))
	require.NoError(t, workload.OwnershipExercised(ops))
}
