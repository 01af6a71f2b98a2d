package kubetest_test

import (
	"os"
	"testing"

	"github.com/execfsm/execfsm/kube/kubetest"
	"k8s.io/client-go/kubernetes"
)

var clientset *kubernetes.Clientset

// A package's tests share one control plane: its TestMain starts it,
// keeps the clientset, runs the tests and stops it. In a _test.go file,
// the function below is the package's func TestMain(m *testing.M).
func ExampleMain() {
	testMain := func(m *testing.M) {
		os.Exit(kubetest.Main(m, kubetest.Options{}, func(cp *kubetest.ControlPlane) {
			clientset = cp.Clientset
		}))
	}
	_ = testMain
}
