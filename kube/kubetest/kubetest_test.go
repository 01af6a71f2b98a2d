package kubetest_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/kube/kubetest"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

var controlPlane *kubetest.ControlPlane

func TestMain(m *testing.M) {
	os.Exit(kubetest.Main(m, kubetest.Options{LeakCheck: true}, func(cp *kubetest.ControlPlane) { controlPlane = cp }))
}

// A user made by AddUser may do nothing until a Role says so, and its
// config, like every client's, still works after the API server
// restarted; what was stored is still there, and a store's watch goes on
// delivering.
func TestUsersAndDataOutliveAnAPIServerRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := controlPlane.Clientset
	_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "restart"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	userCfg, err := controlPlane.AddUser("operator")
	require.NoError(t, err)
	user := kubernetes.NewForConfigOrDie(userCfg)
	_, err = user.CoreV1().ConfigMaps("restart").List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "a new user may do nothing: %v", err)

	require.NoError(t, controlPlane.Grant(ctx, "operator", kube.MasterRole("restart")))
	store, err := kube.New(user, kube.Options{Namespace: "restart"})
	require.NoError(t, err)
	exec, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	_, err = exec.Create(ctx, transition.To(state.Pending))
	require.NoError(t, err, "granted, the user may")
	events, err := store.Watch(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, "ex-1", (<-events).ID)

	require.NoError(t, controlPlane.RestartAPIServer(ctx))

	_, rec, err := exec.Load(ctx)
	require.NoError(t, err, "the same user's config works after the restart")
	require.Equal(t, "pending", rec.Status)
	change, err := exec.Fire(ctx, state.Scheduling, "after the restart")
	require.NoError(t, err)
	for {
		select {
		case ev := <-events:
			if ev.Revision == change.Revision {
				return // the watch resumed across the restart
			}
		case <-ctx.Done():
			t.Fatal("the store's watch never delivered the write made after the restart")
		}
	}
}

func TestRestartHonoursItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, controlPlane.RestartAPIServer(ctx), context.Canceled)
	_, err := controlPlane.Clientset.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err, "a restart refused before it began leaves the API server up")
}
