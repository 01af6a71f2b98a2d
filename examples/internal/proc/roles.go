package proc

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// SupervisorRole is the role of an example's supervisor started as a
// child (the tests of Ctrl-C do): its config is its command line.
const SupervisorRole = "supervisor"

// Roles are the child roles of an example's binary: what each runs with
// its config, returning the process's exit code.
type Roles struct {
	Run       map[string]func(config json.RawMessage) int
	Supervise func(args []string, out io.Writer) int // the example's own flags and run
	ErrorCode int                                    // the exit code of a child that cannot start; zero is 1
}

// Child runs the role spec names: one of Run, or the supervisor with the
// arguments its config holds.
func (r Roles) Child(spec Spec) int {
	if spec.Role == SupervisorRole {
		var args []string
		if err := json.Unmarshal(spec.Config, &args); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return r.errorCode()
		}
		return r.Supervise(args, os.Stdout)
	}
	if run, ok := r.Run[spec.Role]; ok {
		return run(spec.Config)
	}
	fmt.Fprintf(os.Stderr, "unknown role %q\n", spec.Role)
	return r.errorCode()
}

// Main is an example's main: the child it was started as, or its
// supervisor with the command line. It exits with their code.
func (r Roles) Main() {
	spec, isChild, err := ChildSpec()
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(r.errorCode())
	case isChild:
		os.Exit(r.Child(spec))
	}
	os.Exit(r.Supervise(os.Args[1:], os.Stdout))
}

func (r Roles) errorCode() int {
	if r.ErrorCode == 0 {
		return 1
	}
	return r.ErrorCode
}

// Supervise runs an example's supervisor: it parses args with the flags
// register adds (a usage error exits 2), runs run with a context that
// Ctrl-C or SIGTERM ends and an out safe for the children's echoes, and
// turns its outcome into the exit code: 0 passed, 1 failed or an error
// (said on out, after name), 130 interrupted (everything run started is
// stopped and removed by then).
func Supervise(name string, args []string, out io.Writer, register func(*flag.FlagSet), run func(ctx context.Context, out io.Writer) (passed bool, err error)) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	register(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out = SyncWriter(out)
	passed, err := run(ctx, out)
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(out, "interrupted; every process started was stopped and everything created removed")
		return 130
	case err != nil:
		fmt.Fprintln(out, name+":", err)
		return 1
	case !passed:
		return 1
	}
	return 0
}
