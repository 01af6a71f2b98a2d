// Operate shows an operator working on a live controller whose
// executions are in a bbolt file, through the controller's admin handler
// (package admin): the file is locked by the process that has it open,
// so the handler is the only way in while the controller runs.
//
// The program plays the operator. It starts a controller (this same
// binary in another role, a real process) that records Teraslice's
// table in its bbolt file, runs six executions (one completes, one
// fails, one waits for workers, three run) and serves /admin/ with an
// authorizer: anyone reads, only the operator, with a password, writes.
// Then the operator
//
//  1. lists the executions by status through the handler, as
//     `execfsm --http URL list` does;
//  2. tries to stop one without the password: refused, nothing written;
//  3. watches ex-3 and stops it with the password: the controller sees
//     the stop, shuts ex-3 down and writes stopped, and the watch shows
//     each step;
//  4. sends the controller SIGTERM (the platform moving it): the
//     executions still running relocate;
//  5. opens the file, free now, and prints ex-3's audit trail.
//
// With -serve it keeps the controller running after step 3 and prints
// the page's address, for a person to open in a browser, until Ctrl-C.
//
//	go run ./examples/operate
//	go run ./examples/operate -serve
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/execfsm/execfsm/admin"
	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/examples/internal/proc"
	"github.com/execfsm/execfsm/storage"
)

// waitLimit bounds every wait for the controller.
const waitLimit = time.Minute

func main() {
	asChild()
	serve := flag.Bool("serve", false, "keep the controller running after the stop, for a browser, until Ctrl-C")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "execfsm-operate-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	if err := operate(ctx, dir, *serve, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "operate:", err)
		os.Exit(1)
	}
}

// asChild runs the controller and exits, when this process was started
// as one; it returns otherwise.
func asChild() {
	spec, isChild, err := proc.ChildSpec()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if isChild && spec.Role == "controller" {
		os.Exit(runController(spec.Config))
	}
}

// liveController is a started controller and its handler's address.
type liveController struct {
	child    *proc.Child
	url      string
	password string
}

// startController starts the controller of the bbolt file in dir and
// waits until its executions run and its handler serves.
func startController(ctx context.Context, g *proc.Group, dir string) (*liveController, error) {
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	password := hex.EncodeToString(secret)
	child, err := g.Start("controller", "controller", controllerConfig{Dir: dir, Password: password})
	if err != nil {
		return nil, err
	}
	ev, err := child.Await(ctx, "admin", nil, waitLimit)
	if err != nil {
		return nil, fmt.Errorf("the controller serves no handler: %w", err)
	}
	if _, err := child.Await(ctx, "ready", nil, waitLimit); err != nil {
		return nil, fmt.Errorf("the controller did not get ready: %w", err)
	}
	return &liveController{child: child, url: ev.Attrs["url"], password: password}, nil
}

func operate(ctx context.Context, dir string, serve bool, out io.Writer) error {
	out = proc.SyncWriter(out) // the stop is printed while the watch prints
	var g proc.Group
	defer g.KillAll()
	live, err := startController(ctx, &g, dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "A controller (pid %d) holds %s and serves %s\n\n", live.child.PID(), filepath.Join(dir, "state.db"), live.url)

	// 1. Anyone may read.
	anyone, err := admin.NewClient(live.url, admin.ClientOptions{})
	if err != nil {
		return err
	}
	page, err := anyone.List(ctx, admin.ListOptions{})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "1. execfsm --http %s list\n", live.url)
	printList(out, page)

	// 2. Writing needs the operator's password.
	_, err = anyone.Stop(ctx, admin.StopRequest{ID: "ex-3", Reason: "no reason", Actor: "someone"})
	if !errors.Is(err, admin.ErrUnauthenticated) {
		return fmt.Errorf("a stop without the password: want it refused as unauthenticated, got %v", err)
	}
	fmt.Fprintf(out, "\n2. A stop without the password is refused: %v\n", err)

	// 3. Watch ex-3 and stop it.
	operator, err := admin.NewClient(live.url, admin.ClientOptions{Username: operatorUser, Password: live.password})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n3. execfsm --http %s watch ex-3, and stop ex-3 --reason \"user asked\" --user operator\n", live.url)
	watchCtx, endWatch := context.WithTimeout(ctx, waitLimit)
	defer endWatch()
	stopped := make(chan error, 1)
	for ev, err := range operator.Watch(watchCtx, "ex-3") {
		if err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		fmt.Fprintf(out, "   %-8s %s  %s  owner %s\n", ev.Type, ev.ID, ev.Record.Status, owner(ev.Record))
		switch ev.Record.Status {
		case "running":
			go func() {
				s, err := operator.Stop(ctx, admin.StopRequest{ID: "ex-3", Reason: "user asked", Actor: "operator"})
				if err == nil {
					fmt.Fprintf(out, "   stop: %s → %s at revision %d, by %s\n", s.From, s.To, s.Revision, s.Actor)
				}
				stopped <- err
			}()
			continue
		case "stopped":
		default:
			continue
		}
		break
	}
	endWatch()
	if err := <-stopped; err != nil {
		return fmt.Errorf("stop: %w", err)
	}

	if serve {
		fmt.Fprintf(out, "\nOpen %s in a browser (the stop form asks for user %s, password %s). Ctrl-C to end.\n", live.url, operatorUser, live.password)
		<-ctx.Done()
	}

	// 4. The platform moves the controller.
	if err := live.child.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	exit, err := live.child.Wait(context.Background(), waitLimit)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n4. SIGTERM: the controller exited (%s); what it ran relocates\n", exit)

	// 5. The file is free: read it as the CLI's --bolt does.
	db, err := boltstore.Open(filepath.Join(dir, "state.db"), boltstore.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer db.Close()
	store, err := db.Store("executions")
	if err != nil {
		return err
	}
	local, err := admin.NewStoreOperator(store)
	if err != nil {
		return err
	}
	page, err = local.List(context.Background(), admin.ListOptions{})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n5. execfsm --bolt %s list\n", filepath.Join(dir, "state.db"))
	printList(out, page)
	rec, err := local.Get(context.Background(), "ex-3")
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "\n   execfsm history ex-3")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, e := range rec.History.Entries() {
		fmt.Fprintf(tw, "   %s\t→ %s\t%s\t%s\n", orNone(e.From), e.To, e.Actor, e.Reason)
	}
	return tw.Flush()
}

func printList(out io.Writer, page admin.Page) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "   ID\tSTATUS\tOWNER\tREASON")
	for _, r := range page.Items {
		fmt.Fprintf(tw, "   %s\t%s\t%s\t%s\n", r.ID, r.Status, owner(r), strings.ReplaceAll(r.Reason, "\n", " "))
	}
	_ = tw.Flush()
}

func owner(r storage.Record) string {
	if r.Owner == "" {
		return "-"
	}
	return fmt.Sprintf("%s@%d", r.Owner, r.Epoch)
}

func orNone(s string) string {
	if s == "" {
		return "(created)"
	}
	return s
}
