// Kubeoperator is an operator written on controller-runtime whose custom
// resources hold their own state: a TrainingJob's phase lives in its
// .status.phase, where `kubectl get trainingjobs` shows it, written by
// execfsm's store over the resource (kube.Options.Resource) and driven
// by kube/ctrlruntime.Drive. For each TrainingJob the operator runs a
// batch/v1 Job; its phase follows the Job's pod (operator.go), under a
// lifecycle where a drained node relocates the job without counting it
// and an OOM kill restarts it, counted against the spec's maxRetry
// (lifecycle.go).
//
// The demo starts a real kube-apiserver, etcd and kube-controller-manager
// (the Job controller and the garbage collector) through kubetest, and
// plays the scheduler and the kubelet of two nodes itself (kubelet.go).
// It runs the operator as a child process of this binary, as a user
// bound to the store's shipped Roles (kube.ResourceMasterRole and
// kube.ResourceControllerRole) and a Role of its own for its Jobs and
// pods, nothing else; and, a TrainingJob or two each:
//
//  1. drain: the job's node is drained; the pod is evicted, the job
//     relocates to the other node's new pod and finishes there.
//  2. oom: the pod is OOM-killed; the job restarts (counted), and the
//     second OOM kill is past its maxRetry of 2: it fails, saying why.
//  3. stop: its user sets spec.stop; the operator deletes the Job and,
//     once the pods are gone, the job is stopped.
//  4. restart: the API server restarts under a running job, and the
//     operator runs one submitted after it. Then the operator is sent
//     SIGTERM: it hands both over as they are and exits 0; the next
//     operator takes them over at once and finishes them.
//
// A watch on the TrainingJobs (what `kubectl get -w` shows) records every
// phase each one showed; the demo checks it is the record's own trail,
// prints the table kubectl prints and each job's trail, then PASS or
// FAIL, and exits non-zero on FAIL.
//
//	go run ./examples/kubeoperator
//
// The control plane's binaries come from KUBEBUILDER_ASSETS, or are
// built once per machine by kube/hack/test-assets.sh (see package
// kubetest): about nine minutes the first time.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"strings"

	"github.com/execfsm/execfsm/examples/internal/proc"
)

// roles are this binary's: the operator, and the demo that supervises it.
var roles = proc.Roles{Run: map[string]func(json.RawMessage) int{"operator": runOperator}, Supervise: supervise}

func main() { roles.Main() }

// child runs this binary as one of the example's children.
func child(spec proc.Spec) int { return roles.Child(spec) }

func supervise(args []string, out io.Writer) int {
	var verbose bool
	return proc.Supervise("kubeoperator", args, out, func(fs *flag.FlagSet) {
		fs.BoolVar(&verbose, "v", false, "echo everything the operators print")
	}, func(ctx context.Context, out io.Writer) (bool, error) { return demo(ctx, verbose, out) })
}

// shown are the lines of an operator's output the demo echoes without -v.
func shown(line string) bool {
	return strings.HasPrefix(line, "error") || strings.HasPrefix(line, "leading") || strings.Contains(line, "msg=SIGTERM ")
}
