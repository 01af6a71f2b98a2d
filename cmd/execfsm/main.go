// Command execfsm inspects and stops the executions a store holds, for
// operators: get, list, history, watch, diagram and stop, against a bbolt
// file, an etcd cluster, a Kubernetes namespace, or a live controller
// through its admin handler (--http, package admin). Run it with no
// arguments for its usage.
//
//	execfsm --bolt /var/lib/ctl/state.db list --status relocating
//	execfsm --etcd 10.0.0.1:2379 history ex-42
//	execfsm --etcd 10.0.0.1:2379 stop ex-42 --reason "user asked"
//	execfsm --kube-namespace teraslice watch
//	execfsm --http https://ctl:8443/admin/ --user ops stop ex-42 --reason "user asked"
//	execfsm --bolt /var/lib/ctl/state.db repair-log
//	execfsm diagram --format dot | dot -Tsvg > lifecycle.svg
//
// It knows no lifecycle of its own: it reads the table the store records
// (package schema). It writes only with stop, and then as the cluster
// master writes: the recorded table's stopping status, as an outside
// authority (the operator named as the actor), refused where that table
// refuses the move, never taking ownership, so the controller that owns
// the execution is not fenced and shuts down as asked. Through --http the
// controller's handler may refuse a stop the controller would not act
// on (--force writes it anyway) and warns of one nobody holds; warnings
// go to standard error. repair-log inspects, and on request repairs, a
// bbolt file's damaged write-ahead log. --cacert, --cert, --key and
// --user (the password from $EXECFSM_PASSWORD or the terminal) secure
// --etcd and --http.
//
// Exit status: 0 done; 1 the operation failed (no such record, a move
// the recorded table refuses, a record that cannot be read — for list, after
// printing the others); 2 bad usage (a command line it cannot read, or a
// value the store refuses, told in the store's words); 3 the store cannot
// be reached or opened (an unreachable cluster, a bbolt file a running
// controller holds).
//
// A bbolt file allows one writer process and its lock is exclusive: the
// read commands open it read-only under bbolt's shared lock, which any
// number of readers share, but which a running controller's exclusive
// lock keeps out. While a controller has the file open, the CLI reaches
// it only through that controller's admin handler (--http), and says so
// (exit 3).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
