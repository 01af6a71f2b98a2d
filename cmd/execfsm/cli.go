package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os/user"
	"strings"
	"time"

	"github.com/execfsm/execfsm/admin"
	"github.com/execfsm/execfsm/archive"
	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
)

// Exit statuses.
const (
	exitOK          = 0
	exitFailed      = 1 // the operation failed
	exitUsage       = 2 // bad usage
	exitUnavailable = 3 // the store cannot be reached or opened
)

const usage = `usage: execfsm [store flags] <command> [flags] [arguments]

Store (one of):
  --bolt PATH            a bbolt file; --namespace NS picks its namespace (default executions)
  --etcd ENDPOINTS       comma-separated etcd endpoints; --etcd-prefix P (default /execfsm/)
  --kube-namespace NS    a Kubernetes namespace, through --kubeconfig PATH (default $KUBECONFIG,
                         then ~/.kube/config) and --context C; --kube-prefix P names the ConfigMaps
  --http URL             a live controller's admin handler (package admin), such as
                         http://127.0.0.1:8080/admin/: the way to a running controller's bbolt file
  --timeout D            how long a call may take (default 10s; a bbolt file's lock is waited 1s)
  -o, --output FORMAT    text (default) or json; before or after the command

Security (--etcd and --http, with etcdctl's names):
  --cacert FILE          trust the server certificates this CA signed
  --cert FILE --key FILE present this client certificate
  --user NAME            authenticate as NAME; the password is read from $EXECFSM_PASSWORD, or
                         asked on the terminal: never give it on the command line

Commands:
  get ID                      one record
  list [--status S,...]       every record, or those in the given statuses
  history ID                  a record's audit trail as a timeline
  watch [ID...]               the records now, then every change until interrupted (etcd, Kubernetes,
                              a live controller through --http)
  diagram [--format F]        the execution lifecycle, as mermaid (default) or dot; needs no store
  stop ID --reason R          ask an execution to stop, as the cluster master does (--actor names you);
                              through --http, --force stops one the controller would not act on
  backup --to FILE            a backup: a bbolt file's consistent copy (through --http while a controller
                              has it), an etcd snapshot of the whole cluster, checked, a Kubernetes
                              namespace exported
  restore --from FILE         a backup restored: into --bolt PATH (a new file), --kube-namespace NS, or
                              --etcd-data-dir DIR (a new member's, with --etcd-name and --etcd-peer-url)
  delete ID --reason R        remove an execution's record for good: an ended one, or a live one with
                              --force (never one a controller holds); --archive FILE keeps it first
  repair-log [--drop FP]      with --bolt: say what is wrong with the file's write-ahead log and which
                              acknowledged writes a repair would drop; with --drop and the fingerprint
                              it printed, drop them: the log is cut at its last good frame

Exit status: 0 done, 1 the operation failed, 2 bad usage (a command line execfsm cannot read, or a
value the store or the controller refuses: an unknown status, a reason too long), 3 the store cannot
be reached or opened.
`

// failure is an error with its exit status. usage says to print the
// usage after it: a command line execfsm cannot read, not a value the
// store refused.
type failure struct {
	code  int
	err   error
	usage bool
}

func (f *failure) Error() string { return f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

func fail(code int, format string, args ...any) error {
	return &failure{code: code, err: fmt.Errorf(format, args...), usage: code == exitUsage}
}

// globals are the flags before the command.
type globals struct {
	bolt, namespace  string
	etcd, etcdPrefix string
	kubeNamespace    string
	kubeconfig       string
	kubeContext      string
	kubePrefix       string
	http             string
	cacert           string
	cert, key        string
	user             string
	timeout          time.Duration
	output           string
}

// run is the command: it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := dispatch(ctx, args, stdout, stderr)
	if err == nil {
		return exitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintln(stderr, "execfsm:", err)
	var f *failure
	if errors.As(err, &f) {
		if f.usage {
			fmt.Fprint(stderr, "\n"+usage)
		}
		return f.code
	}
	return exitFailed
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	g, rest, err := parseGlobals(args)
	if err != nil {
		return err
	}
	if len(rest) == 0 {
		return fail(exitUsage, "no command")
	}
	run, ok := commands[rest[0]]
	if !ok {
		return fail(exitUsage, "unknown command %q", rest[0])
	}
	cmdArgs, err := outputAfterCommand(&g, rest[1:])
	if err != nil {
		return err
	}
	return run(ctx, invocation{g: g, name: rest[0], args: cmdArgs, stdout: stdout, out: &printer{w: stdout, errw: stderr, json: g.output == "json"}})
}

// outputAfterCommand takes -o/--output from a command's arguments, where
// kubectl users type it (list -o json), into g.
func outputAfterCommand(g *globals, args []string) ([]string, error) {
	var rest []string
	for k := 0; k < len(args); k++ {
		a := args[k]
		name, value, inline := strings.Cut(a, "=")
		if name != "-o" && name != "--output" && name != "-output" {
			rest = append(rest, a)
			continue
		}
		if !inline {
			if k+1 == len(args) {
				return nil, fail(exitUsage, "%s needs a format: text or json", name)
			}
			k++
			value = args[k]
		}
		if value != "text" && value != "json" {
			return nil, fail(exitUsage, "%s %q: want text or json", name, value)
		}
		g.output = value
	}
	return rest, nil
}

// invocation is one command as given: the global flags, the command's
// name and its own arguments, and where it writes.
type invocation struct {
	g      globals
	name   string
	args   []string
	stdout io.Writer
	out    *printer
}

// commands are the CLI's commands, each parsing its own arguments.
var commands = map[string]func(context.Context, invocation) error{
	"get":        runShow((*printer).record),
	"history":    runShow((*printer).history),
	"list":       runList,
	"watch":      runWatch,
	"diagram":    runDiagram,
	"stop":       runStop,
	"delete":     runDelete,
	"repair-log": runRepairLog,
	"backup":     runBackup,
	"restore":    runRestore,
}

// parseGlobals parses the flags before the command.
func parseGlobals(args []string) (globals, []string, error) {
	var g globals
	fs := flag.NewFlagSet("execfsm", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&g.bolt, "bolt", "", "")
	fs.StringVar(&g.namespace, "namespace", "executions", "")
	fs.StringVar(&g.etcd, "etcd", "", "")
	fs.StringVar(&g.etcdPrefix, "etcd-prefix", "", "")
	fs.StringVar(&g.kubeNamespace, "kube-namespace", "", "")
	fs.StringVar(&g.kubeconfig, "kubeconfig", "", "")
	fs.StringVar(&g.kubeContext, "context", "", "")
	fs.StringVar(&g.kubePrefix, "kube-prefix", "", "")
	fs.StringVar(&g.http, "http", "", "")
	fs.StringVar(&g.cacert, "cacert", "", "")
	fs.StringVar(&g.cert, "cert", "", "")
	fs.StringVar(&g.key, "key", "", "")
	fs.StringVar(&g.user, "user", "", "")
	fs.DurationVar(&g.timeout, "timeout", 10*time.Second, "")
	fs.StringVar(&g.output, "output", "text", "")
	fs.StringVar(&g.output, "o", "text", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return g, nil, err
		}
		return g, nil, fail(exitUsage, "%v", err)
	}
	if g.output != "text" && g.output != "json" {
		return g, nil, fail(exitUsage, "--output %q: want text or json", g.output)
	}
	if g.timeout <= 0 {
		return g, nil, fail(exitUsage, "--timeout %v: want a positive duration", g.timeout)
	}
	if err := checkSecurity(g); err != nil {
		return g, nil, err
	}
	return g, fs.Args(), nil
}

// runShow is get and history: one record, printed by print.
func runShow(printRecord func(*printer, storage.Record) error) func(context.Context, invocation) error {
	return func(ctx context.Context, in invocation) error {
		id, err := oneID(in.name, in.args)
		if err != nil {
			return err
		}
		return withStore(ctx, in.g, false, func(b *backend) error {
			in.out.table = b.table
			return show(ctx, in.g, b, id, func(rec storage.Record) error { return printRecord(in.out, rec) })
		})
	}
}

func runList(ctx context.Context, in invocation) error {
	var statuses string
	sub := newSub(in.name)
	sub.StringVar(&statuses, "status", "", "")
	if err := parseFlagsOnly(sub, in.args); err != nil {
		return err
	}
	var wanted []string // checked against the recorded table by the operator's List
	if statuses != "" {
		for s := range strings.SplitSeq(statuses, ",") {
			wanted = append(wanted, strings.TrimSpace(s))
		}
	}
	return withStore(ctx, in.g, false, func(b *backend) error {
		in.out.table = b.table
		return list(ctx, in.g, b, wanted, in.out)
	})
}

func runWatch(ctx context.Context, in invocation) error {
	if in.g.bolt != "" {
		return fail(exitUsage, "watch needs a store others can write while it watches: a bbolt file is locked by the process writing it, so nothing can change while execfsm has it open; watch the controller that has it open (--http), or use etcd or Kubernetes")
	}
	for _, id := range in.args {
		if err := storage.ValidateID(id); err != nil {
			return fail(exitUsage, "%v", err)
		}
	}
	return withStore(ctx, in.g, false, func(b *backend) error { return watch(ctx, b, in.args, in.out) })
}

func runDiagram(ctx context.Context, in invocation) error {
	var format string
	sub := newSub(in.name)
	sub.StringVar(&format, "format", "mermaid", "")
	if err := parseFlagsOnly(sub, in.args); err != nil {
		return err
	}
	if format != "mermaid" && format != "dot" {
		return fail(exitUsage, "--format %q: want mermaid or dot", format)
	}
	if in.g.bolt == "" && in.g.etcd == "" && in.g.kubeNamespace == "" && in.g.http == "" {
		return diagram(teraslice.Lifecycle(), format, in.stdout)
	}
	return withStore(ctx, in.g, false, func(b *backend) error {
		if b.table == nil {
			return fail(exitFailed, "the store records no table to draw (without a store, diagram draws Teraslice's lifecycle)")
		}
		table, _, err := b.table.Rebuild()
		if err != nil {
			return &failure{code: exitFailed, err: err}
		}
		return diagram(table, format, in.stdout)
	})
}

func runStop(ctx context.Context, in invocation) error {
	w, err := parseWrite(in, "it is kept in the record's audit trail", nil)
	if err != nil {
		return err
	}
	return withStore(ctx, in.g, true, func(b *backend) error {
		return stop(ctx, in.g, b, admin.StopRequest{ID: w.id, Reason: w.reason, Actor: w.actor, Force: w.force}, in.out)
	})
}

// write is what a stop or a delete was asked: one id, --reason, --actor
// (the user's name if not given) and --force.
type write struct {
	id, reason, actor string
	force             bool
}

// parseWrite reads a stop's or a delete's command line: more adds the
// command's own flags; a blank --reason is refused, saying why it is
// needed (why).
func parseWrite(in invocation, why string, more func(*flag.FlagSet)) (write, error) {
	var w write
	sub := newSub(in.name)
	sub.StringVar(&w.reason, "reason", "", "")
	sub.StringVar(&w.actor, "actor", "", "")
	sub.BoolVar(&w.force, "force", false, "")
	if more != nil {
		more(sub)
	}
	pos, err := parseSub(sub, in.args)
	if err != nil {
		return w, err
	}
	if w.id, err = oneID(in.name, pos); err != nil {
		return w, err
	}
	if strings.TrimSpace(w.reason) == "" {
		return w, fail(exitUsage, "%s needs --reason: %s", in.name, why)
	}
	w.actor, err = actorOrYou(w.actor)
	return w, err
}

// actorOrYou is the --actor given, or "operator:" and the user's name.
func actorOrYou(actor string) (string, error) {
	if actor == "" {
		actor = "operator"
		if u, err := user.Current(); err == nil && u.Username != "" {
			actor = "operator:" + u.Username
		}
	}
	if len(actor) > storage.MaxOwnerLen {
		return "", fail(exitUsage, "--actor is %d bytes, at most %d", len(actor), storage.MaxOwnerLen)
	}
	return actor, nil
}

// runDelete removes an execution's record for good, as the cluster
// master's Retirer does: an ended one, or a live one with --force; with
// a store reached directly, --archive FILE keeps it first (a JSON Lines
// file, appended to).
func runDelete(ctx context.Context, in invocation) error {
	var keep string
	w, err := parseWrite(in, "the archive keeps it", func(fs *flag.FlagSet) { fs.StringVar(&keep, "archive", "", "") })
	if err != nil {
		return err
	}
	if keep != "" && in.g.http != "" {
		return fail(exitUsage, "--archive with --http: the controller keeps what its handler deletes in its own archive (admin.HandlerOptions.Archive)")
	}
	req := admin.DeleteRequest{ID: w.id, Reason: w.reason, Actor: w.actor, Force: w.force}
	if keep != "" {
		kept, err := archive.Open(keep)
		if err != nil {
			return fail(exitUsage, "--archive: %v", err)
		}
		defer kept.Close()
		req.Archive = kept
	}
	return withStore(ctx, in.g, true, func(b *backend) error {
		if b.table == nil {
			return fail(exitFailed, "the store records no table, so execfsm cannot know which executions have ended; it reads this store and never writes to it")
		}
		ctx, cancel := context.WithTimeout(ctx, in.g.timeout)
		defer cancel()
		deleted, err := b.op.Delete(ctx, req)
		if err != nil {
			return storeError(err)
		}
		return in.out.deleted(deleted)
	})
}

func runRepairLog(_ context.Context, in invocation) error {
	var drop string
	sub := newSub(in.name)
	sub.StringVar(&drop, "drop", "", "")
	if err := parseFlagsOnly(sub, in.args); err != nil {
		return err
	}
	if in.g.bolt == "" || in.g.etcd != "" || in.g.kubeNamespace != "" || in.g.http != "" {
		return fail(exitUsage, "repair-log works on a bbolt file: give --bolt PATH alone")
	}
	return repairLog(in.g, drop, in.out)
}

func newSub(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseSub parses a command's flags wherever they stand among its
// arguments (stop ex-1 --reason x, as kubectl allows), and returns the
// arguments.
func parseSub(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, fail(exitUsage, "%s: %v", fs.Name(), err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// parseFlagsOnly parses the flags of a command that takes no arguments.
func parseFlagsOnly(fs *flag.FlagSet, args []string) error {
	pos, err := parseSub(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fail(exitUsage, "%s takes no arguments, got %q", fs.Name(), pos)
	}
	return nil
}

// oneID checks that a command got exactly one valid record id.
func oneID(cmd string, args []string) (string, error) {
	if len(args) != 1 {
		return "", fail(exitUsage, "%s takes one record id, got %d arguments", cmd, len(args))
	}
	if err := storage.ValidateID(args[0]); err != nil {
		return "", fail(exitUsage, "%v", err)
	}
	return args[0], nil
}

// show reads one record and prints it with print (get, history).
func show(ctx context.Context, g globals, b *backend, id string, print func(storage.Record) error) error {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	rec, err := b.op.Get(ctx, id)
	if err != nil {
		return storeError(err)
	}
	return print(rec)
}

// list prints the records in the wanted statuses (all without), page by
// page read, printed together. A status that is none of the recorded
// table's is bad usage: the operator refuses it (admin.ErrInvalidRequest).
func list(ctx context.Context, g globals, b *backend, wanted []string, out *printer) error {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	var all admin.Page
	for cursor := ""; ; {
		p, err := b.op.List(ctx, admin.ListOptions{Statuses: wanted, Cursor: cursor})
		if err != nil {
			return storeError(err)
		}
		all.Items = append(all.Items, p.Items...)
		all.Foreign = append(all.Foreign, p.Foreign...)
		all.Unreadable = append(all.Unreadable, p.Unreadable...)
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	if err := out.list(all); err != nil {
		return err
	}
	if len(all.Unreadable) > 0 {
		return fail(exitFailed, "%d record(s) could not be read (listed apart); the others are shown", len(all.Unreadable))
	}
	return nil
}

// stop moves the execution to the stopping status of the table the store
// records, through a move that table allows, as the cluster master does
// (admin.Operator's Stop). It never writes where no table is recorded: a
// status the controllers' table lacks would strand the record.
func stop(ctx context.Context, g globals, b *backend, req admin.StopRequest, out *printer) error {
	if b.table == nil {
		return fail(exitFailed, "the store records no table, so execfsm cannot know which status stops an execution; it reads this store and never writes to it.\n"+
			"  The controllers record theirs when they start (schema.Save in package github.com/execfsm/execfsm/schema)")
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	stopped, err := b.op.Stop(ctx, req)
	if err != nil {
		return storeError(err)
	}
	return out.stopped(stopped)
}

// diagram draws table as mermaid or dot.
func diagram[S comparable](table *transition.Table[S], format string, w io.Writer) error {
	text := table.Mermaid()
	if format == "dot" {
		text = table.DOT()
	}
	_, err := io.WriteString(w, text)
	return err
}

// storeError gives a store's error its exit status: what the store said
// about the record or the move is the operation failing; a store (or a
// controller's handler) that could not answer in time, or at all, is
// unavailable.
func storeError(err error) error {
	var netErr *net.OpError
	var urlErr *url.Error // an HTTP request that got no answer (TLS refused, connection lost)
	var apiErr *admin.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return &failure{code: exitUnavailable, err: fmt.Errorf("the store did not answer in time: %w", err)}
	case errors.As(err, &netErr), errors.As(err, &urlErr):
		return &failure{code: exitUnavailable, err: fmt.Errorf("the store cannot be reached: %w", err)}
	case errors.Is(err, admin.ErrUnavailable), errors.Is(err, admin.ErrDropped),
		errors.As(err, &apiErr) && (apiErr.StatusCode == 502 || apiErr.StatusCode == 503 || apiErr.StatusCode == 504):
		return &failure{code: exitUnavailable, err: err}
	case errors.Is(err, admin.ErrInvalidRequest), errors.Is(err, storage.ErrInvalidRecord):
		// A value the store (or a controller's handler) refused: bad
		// usage, told in its own words; the usage would not say more.
		return &failure{code: exitUsage, err: err}
	}
	return &failure{code: exitFailed, err: err}
}

// repairLog reports what is wrong with a bbolt file's write-ahead log,
// and with drop (the report's fingerprint) repairs it. A damaged log
// reported and not repaired is a failure (exit 1): the file does not
// open until someone decides.
func repairLog(g globals, drop string, out *printer) error {
	opts := boltstore.Options{Timeout: time.Second}
	var (
		d   *boltstore.LogDamage
		err error
	)
	if drop == "" {
		d, err = boltstore.InspectLog(g.bolt, opts)
	} else {
		d, err = boltstore.RepairLog(g.bolt, drop, opts)
	}
	switch {
	case errors.Is(err, boltstore.ErrLocked):
		return errLocked(g.bolt, err)
	case errors.Is(err, boltstore.ErrLogChanged):
		return &failure{code: exitFailed, err: fmt.Errorf("%w: inspect it again (execfsm --bolt %s repair-log)", err, g.bolt)}
	case err != nil:
		return &failure{code: exitUnavailable, err: err}
	}
	if err := out.logDamage(g.bolt, d, drop != ""); err != nil {
		return err
	}
	if d != nil && drop == "" {
		return &failure{code: exitFailed, err: fmt.Errorf("the write-ahead log of %s is damaged; nothing was changed", g.bolt)}
	}
	return nil
}

// errLocked explains a bbolt file another process holds.
func errLocked(path string, err error) error {
	return &failure{code: exitUnavailable, err: fmt.Errorf("%w\n"+
		"  another process (a running controller?) has %s open; bbolt allows one process at a time,\n"+
		"  and while a writer has the file nobody can open it, even to read. Go through that controller's\n"+
		"  admin handler (--http URL, package admin), or stop the process", err, path)}
}
