// Relocation shows, with real processes and real signals, the Teraslice
// execution-controller case this library exists for.
//
// A supervisor plays the platform and the cluster master. It starts
// execution controllers as child processes (this same binary in another
// role); they share one store, by default an etcd the supervisor starts
// in-process, so nothing needs installing. Each controller runs a fake
// slicer, decides on startup with recovery.Startup and handles SIGTERM
// with recovery.Terminate. The scenarios:
//
//  1. drain: the node is drained; SIGTERM makes the controller write
//     relocating and exit without shutting the execution down; a new
//     controller resumes it, and it completes.
//  2. oom: the controller is SIGKILLed while running, again and again.
//     Each restart within the budget resumes; the one after the budget
//     fails the execution with the reason, instead of crash-looping.
//  3. stop: the cluster master writes stopping, then SIGTERM: a clean
//     shutdown to stopped.
//  4. race: SIGTERM arrives while the master writes stopping: exactly one
//     outcome (relocated, then stopped by the successor; or shut down),
//     never both.
//  5. overlap: the old controller is still alive when the new one takes
//     over; its late write is fenced.
//
// Scenarios 3 to 5 need a store two processes can use at once; with
// -store bolt (a file one process locks) only 1 and 2 run, and the
// supervisor says so. It prints a timeline of every execution from its
// audit trail and a PASS/FAIL line per scenario, and exits non-zero if
// any failed. Ctrl-C stops everything and removes what it created.
//
//	go run ./examples/relocation
//	go run ./examples/relocation -store bolt
//	go run ./examples/relocation -scenarios oom,race -v
package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"strings"

	"github.com/execfsm/execfsm/examples/internal/proc"
	"github.com/execfsm/execfsm/examples/internal/stores"
)

// roles are this binary's: the example's children, and its supervisor.
var roles = proc.Roles{Run: map[string]func(json.RawMessage) int{"controller": runController}, Supervise: supervise, ErrorCode: exitError}

func main() { roles.Main() }

// child runs this binary as one of the example's children.
func child(spec proc.Spec) int { return roles.Child(spec) }

// options are the supervisor's flags.
type options struct {
	store     stores.Flags
	scenarios string
	verbose   bool
}

func supervise(args []string, out io.Writer) int {
	var o options
	return proc.Supervise("relocation", args, out, func(fs *flag.FlagSet) {
		o.store.Register(fs, "etcd")
		fs.StringVar(&o.scenarios, "scenarios", strings.Join(scenarioNames(), ","), "scenarios to run")
		fs.BoolVar(&o.verbose, "v", false, "echo what the controllers print")
	}, func(ctx context.Context, out io.Writer) (bool, error) { return run(ctx, o, out) })
}
