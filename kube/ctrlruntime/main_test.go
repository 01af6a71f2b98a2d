package ctrlruntime_test

import (
	"os"
	"testing"

	"github.com/execfsm/execfsm/kube/kubetest"
	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// cfg is the API server's administrator's: the tests play the users and
// run the operators under test with it.
var cfg *rest.Config

// TestMain starts a real kube-apiserver (kubetest) for the tests of
// Drive; the adapters' tests need none but share the package.
func TestMain(m *testing.M) {
	// controller-runtime logs through logr; the tests read what it did
	// from the API server, not from its log.
	logf.SetLogger(logr.Discard())
	os.Exit(kubetest.Main(m, kubetest.Options{LeakCheck: true}, func(cp *kubetest.ControlPlane) { cfg = cp.Config }))
}
