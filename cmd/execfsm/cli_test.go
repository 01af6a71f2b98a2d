package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/etcdstore"
	"github.com/execfsm/execfsm/etcdstore/embedded"
	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/kube/kubetest"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The watch and the embedded etcd start goroutines. With
// envRunAsCLI set, the test binary is the command itself, for a test
// that runs it as a process (on a terminal).
func TestMain(m *testing.M) {
	if args := os.Getenv(envRunAsCLI); args != "" {
		var argv []string
		if err := json.Unmarshal([]byte(args), &argv); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(exitUsage)
		}
		os.Exit(run(context.Background(), argv, os.Stdout, os.Stderr))
	}
	opts := kubetest.LingeringGoroutines()
	for _, f := range embedded.LingeringGoroutines {
		opts = append(opts, goleak.IgnoreAnyFunction(f))
	}
	goleak.VerifyTestMain(m, opts...)
}

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// bound is how long a test waits for anything.
const bound = 20 * time.Second

var bg = context.Background()

// result is one run of the command.
type result struct {
	stdout, stderr string
	code           int
}

func execfsm(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, bound)
	defer cancel()
	var out, errs bytes.Buffer
	code := run(ctx, args, &out, &errs)
	return result{out.String(), errs.String(), code}
}

// takenAt matches every UTC time in an output: golden keeps the test's
// fixed clock's (2026-12-03T12:00:xx, whole seconds) and replaces the
// ones a store stamps with its own clock (a take-over's), whatever the
// day. It matched only 2026-12-03, the day it was written, and the
// golden tests failed from the next day on.
var takenAt = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)

// golden compares got with testdata/name, or rewrites it with -update.
// Times off the test's clock are replaced by <now>.
func golden(t *testing.T, name, got string) {
	t.Helper()
	got = takenAt.ReplaceAllStringFunc(got, func(m string) string {
		if strings.HasPrefix(m, "2026-12-03T12:00:") && !strings.Contains(m, ".") {
			return m
		}
		return "<now>"
	})
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), got)
}

// columns splits a text table's line into its cells.
var columns = regexp.MustCompile(`\s{2,}`)

// withoutRevisions replaces the REVISION column of a text table with
// <rev>: etcd's and Kubernetes' revisions count writes the test does not
// make (the cluster's own), so only their order is the store's.
func withoutRevisions(table string) string {
	lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
	col := slices.Index(columns.Split(lines[0], -1), "REVISION")
	for i, line := range lines[1:] {
		cells := columns.Split(line, -1)
		if col >= 0 && col < len(cells) {
			cells[col] = "<rev>"
		}
		lines[i+1] = strings.Join(cells, "  ")
	}
	lines[0] = strings.Join(columns.Split(lines[0], -1), "  ")
	return strings.Join(lines, "\n") + "\n"
}

// ticking is a clock a second further at each reading, from a fixed
// time: the records' times are golden.
func ticking() func() time.Time {
	var mu sync.Mutex
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Second)
		return now
	}
}

// populate writes the executions every store test starts from: one per
// interesting status, one relocated by its owner.
func populate(t *testing.T, store storage.Store) {
	t.Helper()
	clock := ticking()
	opts := transition.PersistedOptions{Actor: "cluster-master", Clock: clock}
	move := func(id string, path ...state.Status) *transition.Persisted[state.Status] {
		exec, err := transition.NewPersisted(teraslice.Lifecycle(), store, id, opts)
		require.NoError(t, err)
		_, err = exec.Create(bg, transition.To(state.Pending).Because("submitted"))
		require.NoError(t, err)
		for _, s := range path {
			_, err = exec.Fire(bg, s, "")
			require.NoError(t, err)
		}
		return exec
	}
	move("ex-pending")
	move("ex-done", state.Scheduling, state.Initializing, state.Running, state.Completed)
	move("ex-moving", state.Scheduling, state.Initializing, state.Running)
	controller, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-moving", transition.PersistedOptions{Actor: "pod-a", Clock: clock})
	require.NoError(t, err)
	_, _, err = controller.Acquire(bg, storage.Lease{Holder: "pod-a", TTL: time.Minute, Reason: "controller started"}, nil)
	require.NoError(t, err)
	_, err = controller.Fire(bg, state.Relocating, "SIGTERM: node drained")
	require.NoError(t, err)
	require.NoError(t, controller.Ownership().Release(bg))
	move("ex-running", state.Scheduling, state.Initializing, state.Running)
	// The controllers recorded their table (last, so the records'
	// revisions stay as the golden files have them).
	_, err = schema.Save(bg, store, "teraslice", teraslice.Roles())
	require.NoError(t, err)
}

// boltFile makes a bbolt file holding the executions, closed.
func boltFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := boltstore.Open(path, boltstore.Options{})
	require.NoError(t, err)
	s, err := db.Store("executions")
	require.NoError(t, err)
	populate(t, s)
	require.NoError(t, db.Close())
	return path
}

// readGolden runs every read command against store (its flags) and
// compares each output with its golden file: the same files whatever
// the way to the store.
func readGolden(t *testing.T, store ...string) {
	t.Helper()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"get.txt", []string{"get", "ex-moving"}},
		{"get.json", []string{"-o", "json", "get", "ex-moving"}},
		{"list.txt", []string{"list"}},
		{"list-relocating.txt", []string{"list", "--status", "relocating,pending"}},
		{"list.json", []string{"--output", "json", "list", "--status", "relocating"}},
		{"history.txt", []string{"history", "ex-moving"}},
		{"history.json", []string{"-o", "json", "history", "ex-pending"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := execfsm(t, append(store, tc.args...)...)
			require.Equal(t, 0, r.code, r.stderr)
			require.Empty(t, r.stderr)
			golden(t, tc.name, r.stdout)
		})
	}
}

func TestReadCommandsOnABoltFile(t *testing.T) {
	path := boltFile(t)
	readGolden(t, "--bolt", path)
	// JSON is the record as the store keeps it.
	r := execfsm(t, "--bolt", path, "-o", "json", "get", "ex-moving")
	var rec storage.Record
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rec))
	require.Equal(t, "relocating", rec.Status)
	require.Equal(t, "running", rec.Previous)
	require.Equal(t, storage.Claim{Owner: "pod-a", Epoch: 1}, rec.Claim())
}

func TestStopWritesAsTheClusterMasterDoes(t *testing.T) {
	path := boltFile(t)
	r := execfsm(t, "--bolt", path, "stop", "ex-running", "--reason", "user asked", "--actor", "operator:ana")
	require.Equal(t, 0, r.code, r.stderr)
	golden(t, "stop.txt", r.stdout)

	r = execfsm(t, "--bolt", path, "-o", "json", "stop", "--reason", "again", "--actor", "operator:ana", "ex-running")
	require.Equal(t, 0, r.code, r.stderr)
	golden(t, "stop-again.json", r.stdout)

	// The owner is untouched: an outside authority takes no ownership.
	r = execfsm(t, "--bolt", path, "stop", "ex-moving", "--reason", "drain is taking too long", "--actor", "operator:ana")
	require.Equal(t, 0, r.code, r.stderr)
	r = execfsm(t, "--bolt", path, "-o", "json", "get", "ex-moving")
	var rec storage.Record
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rec))
	require.Equal(t, "stopping", rec.Status)
	require.Equal(t, storage.Claim{Owner: "pod-a", Epoch: 1}, rec.Claim())
	last, _ := rec.History.Last()
	require.Equal(t, "operator:ana", last.Actor)
	require.Empty(t, last.Owner)

	// The lifecycle refuses what it refuses; nothing is written.
	before := execfsm(t, "--bolt", path, "-o", "json", "get", "ex-done").stdout
	r = execfsm(t, "--bolt", path, "stop", "ex-done", "--reason", "x")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "completed is terminal")
	require.Equal(t, before, execfsm(t, "--bolt", path, "-o", "json", "get", "ex-done").stdout)
	r = execfsm(t, "--bolt", path, "stop", "ex-nobody", "--reason", "x")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "not found")
}

func TestUsageErrorsExitTwo(t *testing.T) {
	path := boltFile(t)
	for _, args := range [][]string{
		{},
		{"--bolt", path},
		{"--bolt", path, "frobnicate"},
		{"--bolt", path, "get"},
		{"--bolt", path, "get", "a", "b"},
		{"--bolt", path, "get", ""},
		{"--bolt", path, "stop", "ex-running"},
		{"--bolt", path, "stop", "ex-running", "--reason", "x", "--actor", strings.Repeat("a", storage.MaxOwnerLen+1)},
		{"--bolt", path, "watch"},
		{"--bolt", path, "--etcd", "127.0.0.1:1", "list"},
		{"-o", "yaml", "--bolt", path, "list"},
		{"--timeout", "0s", "--bolt", path, "list"},
		{"get", "ex-1"},
		{"diagram", "--format", "png"},
		{"--bolt", path, "--nope", "list"},
	} {
		r := execfsm(t, args...)
		require.Equal(t, 2, r.code, "%q: %s", args, r.stderr)
		require.Contains(t, r.stderr, "usage: execfsm", "%q", args)
	}
	r := execfsm(t, "-h")
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stdout, "usage: execfsm")
}

// A value the store refuses is bad usage too, told in the store's words
// alone: the usage would not say which status exists (the operator's
// trial got 35 lines of it for a status of another version).
func TestAValueTheStoreRefusesExitsTwoWithItsError(t *testing.T) {
	path := boltFile(t)
	r := execfsm(t, "--bolt", path, "list", "--status", "sleeping")
	require.Equal(t, 2, r.code, r.stderr)
	require.Equal(t, "execfsm: admin: list: invalid request: \"sleeping\" is not a status of table teraslice (version 1): "+
		"pending, scheduling, initializing, running, recovering, relocating, failing, paused, stopping, completed, stopped, rejected, failed, terminated\n", r.stderr)
	r = execfsm(t, "--bolt", path, "stop", "ex-running", "--reason", strings.Repeat("x", storage.MaxReasonLen+1))
	require.Equal(t, 2, r.code, r.stderr)
	require.NotContains(t, r.stderr, "usage: execfsm")
	require.Contains(t, r.stderr, "the reason is")
}

func TestDiagram(t *testing.T) {
	r := execfsm(t, "diagram")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, teraslice.Lifecycle().Mermaid(), r.stdout)
	r = execfsm(t, "diagram", "--format", "dot")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, teraslice.Lifecycle().DOT(), r.stdout)
}

// While a controller holds the bbolt file, nothing can open it, even to
// read: the command says so and exits 3, and never waits long.
func TestABoltFileAControllerHoldsIsUnavailable(t *testing.T) {
	path := boltFile(t)
	db, err := boltstore.Open(path, boltstore.Options{}) // the running controller
	require.NoError(t, err)
	for _, args := range [][]string{{"get", "ex-moving"}, {"stop", "ex-running", "--reason", "x"}} {
		r := execfsm(t, append([]string{"--bolt", path}, args...)...)
		require.Equal(t, 3, r.code, r.stderr)
		require.Contains(t, r.stderr, "locked by another process")
		require.Contains(t, r.stderr, "nobody can open it, even to read")
		require.Contains(t, r.stderr, "admin handler (--http URL", "the way in, as docs/operating.md says")
	}
	require.NoError(t, db.Close())
	r := execfsm(t, "--bolt", filepath.Join(t.TempDir(), "missing.db"), "list")
	require.Equal(t, 3, r.code)
	require.Contains(t, r.stderr, "no such file")
	r = execfsm(t, "--bolt", path, "--namespace", "simulators", "list")
	require.Equal(t, 1, r.code) // the file is there; that namespace is not
}

// A record that cannot be read is listed apart, the others are shown,
// and the exit status says something failed.
func TestListShowsWhatItCanAndReportsWhatItCannot(t *testing.T) {
	path := boltFile(t)
	raw, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	require.NoError(t, err)
	require.NoError(t, raw.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("ns/executions")).Bucket([]byte("records")).Put([]byte("ex-pending"), []byte("\x01{not json"))
	}))
	require.NoError(t, raw.Close())
	r := execfsm(t, "--bolt", path, "list")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stdout, "ex-running")
	require.Contains(t, r.stdout, "ex-pending  (unreadable)")
	require.Contains(t, r.stderr, "1 record(s) could not be read")
	r = execfsm(t, "--bolt", path, "get", "ex-pending")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "corrupt")
}

// syncBuffer is a buffer the watch writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitFor(t *testing.T, buf *syncBuffer, text string) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !strings.Contains(buf.String(), text) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within %v in:\n%s", text, bound, buf.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// exerciseNetworkedStore runs every command on the populated store the
// flags in store name, one others can write while a watch runs: list
// and history golden (testdata/*-name.txt, revisions aside), the record
// as JSON, a watch of two ids that sees a stop land, and a stop the
// lifecycle refuses. With jsonWatch the watch prints JSON lines.
func exerciseNetworkedStore(t *testing.T, name string, store []string, jsonWatch bool) {
	t.Helper()
	r := execfsm(t, append(store, "list", "--status", "relocating")...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "ex-moving")
	require.Equal(t, 2, strings.Count(r.stdout, "\n"), r.stdout)
	r = execfsm(t, append(store, "list")...)
	require.Equal(t, 0, r.code, r.stderr)
	golden(t, "list-"+name+".txt", withoutRevisions(r.stdout))
	r = execfsm(t, append(store, "history", "ex-moving")...)
	require.Equal(t, 0, r.code, r.stderr)
	golden(t, "history-"+name+".txt", withoutRevisions(r.stdout))
	r = execfsm(t, append(store, "-o", "json", "get", "ex-moving")...)
	require.Equal(t, 0, r.code, r.stderr)
	var rec storage.Record
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rec))
	require.Equal(t, storage.Claim{Owner: "pod-a", Epoch: 1}, rec.Claim())

	// Watch: the records now, then the stop as it lands.
	var out, errs syncBuffer
	ctx, cancel := context.WithCancel(bg)
	done := make(chan int, 1)
	watchArgs, current, changed := append(store, "watch", "ex-moving", "ex-running"), "current    ex-running", "changed    ex-running  stopping"
	if jsonWatch {
		watchArgs = append([]string{"-o", "json"}, watchArgs...)
		current, changed = `{"type":"current","id":"ex-running","record":{"id":"ex-running","status":"running"`, `{"type":"changed","id":"ex-running","record":{"id":"ex-running","status":"stopping"`
	}
	go func() { done <- run(ctx, watchArgs, &out, &errs) }()
	waitFor(t, &out, current)
	require.NotContains(t, out.String(), "ex-pending", "only the ids asked for")
	r = execfsm(t, append(store, "stop", "ex-running", "--reason", "user asked", "--actor", "operator:ana")...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "ex-running: running → stopping")
	waitFor(t, &out, changed)
	cancel()
	select {
	case code := <-done:
		require.Equal(t, 0, code, errs.String())
	case <-time.After(bound):
		t.Fatal("watch did not end when interrupted")
	}
	if jsonWatch { // one object per line, for jq and friends
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var ev map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &ev), line)
		}
	}

	r = execfsm(t, append(store, "stop", "ex-done", "--reason", "x")...)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "completed is terminal")
}

// TestEveryCommandOnEtcd runs them against an etcd as production runs
// one: clients over TLS with a certificate, and a user allowed the
// prefixes it works on, its password from the environment.
func TestEveryCommandOnEtcd(t *testing.T) {
	pki := newPKI(t)
	cluster, err := embedded.Start(t.TempDir(), 1, embedded.Options{
		ClientTLS: &embedded.TLSFiles{CertFile: pki.serverCert, KeyFile: pki.serverKey, TrustedCAFile: pki.ca},
	})
	require.NoError(t, err)
	t.Cleanup(cluster.Close) // after the clients close: a client still connected holds etcd's Close for seconds
	endpoint := cluster.Endpoint(0)
	client := etcdWithAuth(t, pki, endpoint, "ana", "correct horse", "/teraslice/", "/ci/", "/execfsm/")
	store, err := etcdstore.New(client, etcdstore.Options{Prefix: "/teraslice/"})
	require.NoError(t, err)
	populate(t, store)
	secure := []string{"--cacert", pki.ca, "--cert", pki.clientCert, "--key", pki.clientKey, "--user", "ana"}
	t.Setenv(envPassword, "correct horse")
	etcd := append([]string{"--etcd", endpoint, "--etcd-prefix", "/teraslice/"}, secure...)

	exerciseNetworkedStore(t, "etcd", etcd, false)

	// A user's own table, under a prefix of its own.
	ci, err := etcdstore.New(client, etcdstore.Options{Prefix: "/ci/"})
	require.NoError(t, err)
	populateCIJobs(t, ci)
	customTable(t, append([]string{"--etcd", endpoint, "--etcd-prefix", "/ci/"}, secure...), getter(t, ci))

	// Another prefix holds nothing.
	r := execfsm(t, append(append([]string{"--etcd", endpoint}, secure...), "get", "ex-running")...)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "not found")

	// A wrong password, no client certificate, no CA: refused.
	t.Setenv(envPassword, "wrong")
	r = execfsm(t, append(etcd, "get", "ex-running")...)
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stderr, "authentication failed")
	r = execfsm(t, "--etcd", endpoint, "--timeout", "500ms", "--cacert", pki.ca, "get", "ex-running")
	require.Equal(t, 3, r.code, r.stderr)
	r = execfsm(t, "--etcd", endpoint, "--timeout", "500ms", "get", "ex-running")
	require.Equal(t, 3, r.code, r.stderr)
}

// etcdWithAuth turns etcd's authentication on, with root and a user
// allowed to read and write under prefixes, and returns root's client.
func etcdWithAuth(t *testing.T, p pki, endpoint, user, password string, prefixes ...string) *clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, bound)
	defer cancel()
	pair, err := tls.LoadX509KeyPair(p.clientCert, p.clientKey)
	require.NoError(t, err)
	tlsCfg := &tls.Config{RootCAs: p.pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	connect := func(user, password string) *clientv3.Client {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: tlsCfg, Username: user, Password: password,
			DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		require.NoError(t, err)
		return c
	}
	setup := connect("", "")
	defer setup.Close()
	_, err = setup.UserAdd(ctx, "root", "root password")
	require.NoError(t, err)
	_, err = setup.UserGrantRole(ctx, "root", "root")
	require.NoError(t, err)
	_, err = setup.RoleAdd(ctx, "operator")
	require.NoError(t, err)
	for _, prefix := range prefixes {
		_, err = setup.RoleGrantPermission(ctx, "operator", prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermReadWrite))
		require.NoError(t, err)
	}
	_, err = setup.UserAdd(ctx, user, password)
	require.NoError(t, err)
	_, err = setup.UserGrantRole(ctx, user, "operator")
	require.NoError(t, err)
	_, err = setup.AuthEnable(ctx)
	require.NoError(t, err)
	root := connect("root", "root password")
	t.Cleanup(func() { _ = root.Close() })
	return root
}

func TestAnUnreachableClusterIsUnavailable(t *testing.T) {
	start := time.Now()
	r := execfsm(t, "--etcd", "127.0.0.1:1", "--timeout", "300ms", "get", "ex-1")
	require.Equal(t, 3, r.code, fmt.Sprintf("%+v", r))
	require.Contains(t, r.stderr, "did not answer in time")
	require.Less(t, time.Since(start), bound)
}

// On a Kubernetes namespace, through a kubeconfig, against a real
// kube-apiserver: the same commands, watch included.
func TestEveryCommandOnKubernetes(t *testing.T) {
	cp, err := kubetest.Start(kubetest.Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, cp.Stop()) }()
	_, err = cp.Clientset.CoreV1().Namespaces().Create(bg, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "teraslice"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	store, err := kube.New(cp.Clientset, kube.Options{Namespace: "teraslice"})
	require.NoError(t, err)
	populate(t, store)

	// The kubeconfig an operator would have for this cluster: a user
	// who reads (ReaderRole) and asks executions to stop as the cluster
	// master does (MasterRole), nothing more.
	cfg, err := cp.AddUser("operator")
	require.NoError(t, err)
	for _, role := range []*rbacv1.Role{kube.ReaderRole("teraslice"), kube.MasterRole("teraslice")} {
		require.NoError(t, cp.Grant(bg, "operator", role))
	}
	kubeconfig := filepath.Join(t.TempDir(), "config")
	require.NoError(t, clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"test": {Server: cfg.Host, CertificateAuthorityData: cfg.CAData}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{"operator": {
			ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken,
		}},
		Contexts:       map[string]*clientcmdapi.Context{"test": {Cluster: "test", AuthInfo: "operator"}},
		CurrentContext: "test",
	}, kubeconfig))
	k := []string{"--kube-namespace", "teraslice", "--kubeconfig", kubeconfig}

	exerciseNetworkedStore(t, "kube", k, true)

	// A user's own table, in a namespace of its own: the same user may
	// read it and stop by it.
	_, err = cp.Clientset.CoreV1().Namespaces().Create(bg, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ci"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, role := range []*rbacv1.Role{kube.ReaderRole("ci"), kube.MasterRole("ci")} {
		require.NoError(t, cp.Grant(bg, "operator", role))
	}
	ci, err := kube.New(cp.Clientset, kube.Options{Namespace: "ci"})
	require.NoError(t, err)
	populateCIJobs(t, ci)
	customTable(t, []string{"--kube-namespace", "ci", "--kubeconfig", kubeconfig}, getter(t, ci))

	r := execfsm(t, "--kube-namespace", "teraslice", "--kubeconfig", filepath.Join(t.TempDir(), "none"), "list")
	require.Equal(t, 3, r.code, r.stderr)

	// A backup of the namespace, restored into another: the same
	// executions, as the operator's own Roles allow it.
	_, err = cp.Clientset.CoreV1().Namespaces().Create(bg, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "restored"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, role := range []*rbacv1.Role{kube.ReaderRole("restored"), kube.MasterRole("restored")} {
		require.NoError(t, cp.Grant(bg, "operator", role))
	}
	export := filepath.Join(t.TempDir(), "teraslice.jsonl")
	r = execfsm(t, append(k, "backup", "--to", export)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "the store at resourceVersion")
	r = execfsm(t, "--kube-namespace", "restored", "--kubeconfig", kubeconfig, "restore", "--from", export)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "4 record(s) imported")
	before := execfsm(t, append(k, "-o", "json", "get", "ex-moving")...)
	after := execfsm(t, "--kube-namespace", "restored", "--kubeconfig", kubeconfig, "-o", "json", "get", "ex-moving")
	require.Equal(t, 0, after.code, after.stderr)
	require.Equal(t, withoutRevision(t, before.stdout), withoutRevision(t, after.stdout))
}

// withoutRevision is a record printed as JSON, its revision (the store's
// own) taken out.
func withoutRevision(t *testing.T, printed string) storage.Record {
	t.Helper()
	var rec storage.Record
	require.NoError(t, json.Unmarshal([]byte(printed), &rec))
	rec.Revision = 0
	return rec
}

// A bbolt file backed up and restored into a new file is the same store;
// neither ever overwrites a file.
func TestBackupAndRestoreOfABoltFile(t *testing.T) {
	path := boltFile(t)
	dir := t.TempDir()
	backup := filepath.Join(dir, "backup.db")
	r := execfsm(t, "--bolt", path, "backup", "--to", backup)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "the store at revision")
	r = execfsm(t, "--bolt", path, "backup", "--to", backup)
	require.Equal(t, 2, r.code, "a backup never overwrites: %s", r.stderr)
	restored := filepath.Join(dir, "restored.db")
	r = execfsm(t, "--bolt", restored, "restore", "--from", backup)
	require.Equal(t, 0, r.code, r.stderr)
	r = execfsm(t, "--bolt", restored, "restore", "--from", backup)
	require.Equal(t, 2, r.code, "a restore never overwrites: %s", r.stderr)
	for _, id := range []string{"ex-moving", "ex-running", "ex-done"} {
		before := execfsm(t, "--bolt", path, "-o", "json", "get", id)
		after := execfsm(t, "--bolt", restored, "-o", "json", "get", id)
		require.Equal(t, 0, after.code, after.stderr)
		require.JSONEq(t, before.stdout, after.stdout, "%s is the same record, revision and all", id)
	}
	r = execfsm(t, "--bolt", restored, "restore", "--from", path+".nothing")
	require.Equal(t, 2, r.code)
	r = execfsm(t, "restore", "--from", backup)
	require.Equal(t, 2, r.code, "no store to restore into")
}

// An etcd snapshot taken by backup is restored into a new member's data
// directory.
func TestBackupAndRestoreOfAnEtcdSnapshot(t *testing.T) {
	cluster, err := embedded.Start(t.TempDir(), 1, embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	dir := t.TempDir()
	snapshot := filepath.Join(dir, "snapshot.db")
	r := execfsm(t, "--etcd", cluster.Endpoint(0), "backup", "--to", snapshot)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "the store at revision")
	data := filepath.Join(dir, "member")
	r = execfsm(t, "restore", "--from", snapshot, "--etcd-data-dir", data, "--etcd-name", "m0", "--etcd-peer-url", "http://127.0.0.1:2390")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "--initial-cluster m0=http://127.0.0.1:2390")
	_, err = os.Stat(filepath.Join(data, "member", "snap", "db"))
	require.NoError(t, err, "the member's database is there")
}

func TestAnUnreachableAPIServerIsUnavailable(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	require.NoError(t, clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"gone": {Server: "https://127.0.0.1:1", InsecureSkipTLSVerify: true}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"u": {Token: "t"}},
		Contexts:       map[string]*clientcmdapi.Context{"gone": {Cluster: "gone", AuthInfo: "u"}},
		CurrentContext: "gone",
	}, kubeconfig))
	r := execfsm(t, "--kube-namespace", "teraslice", "--kubeconfig", kubeconfig, "--timeout", "2s", "get", "ex-1")
	require.Equal(t, 3, r.code, fmt.Sprintf("%+v", r))
}

// A bbolt file whose log was damaged after a crash: repair-log says what
// is wrong and which acknowledged writes a repair would drop, changing
// nothing (exit 1); with the fingerprint it printed, it repairs, and the
// file opens with the writes before the damage.
func TestRepairLogReportsThenRepairsOnlyOnRequest(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "live.db")
	db, err := boltstore.Open(live, boltstore.Options{})
	require.NoError(t, err)
	s, err := db.Store("executions")
	require.NoError(t, err)
	var sizes []int64
	for k := range 3 {
		_, err := s.Create(bg, storage.Record{ID: fmt.Sprint("ex-", k), Status: "running"})
		require.NoError(t, err)
		segs, _ := filepath.Glob(live + ".wal-*")
		require.Len(t, segs, 1)
		info, err := os.Stat(segs[0])
		require.NoError(t, err)
		sizes = append(sizes, info.Size())
	}
	// What a crash leaves: the file and its log as they are while it runs.
	crashed := filepath.Join(t.TempDir(), "state.db")
	copyFile(t, live, crashed)
	segs, _ := filepath.Glob(live + ".wal-*")
	log := crashed + strings.TrimPrefix(segs[0], live)
	copyFile(t, segs[0], log)
	require.NoError(t, db.Close())
	data, err := os.ReadFile(log)
	require.NoError(t, err)
	data[sizes[0]+10] ^= 0x40 // damage to ex-1's write, ex-2's after it
	require.NoError(t, os.WriteFile(log, data, 0o600))

	r := execfsm(t, "--bolt", crashed, "repair-log")
	require.Equal(t, exitFailed, r.code, r.stderr)
	require.Contains(t, r.stdout, "is damaged")
	require.Contains(t, r.stdout, "revision 3: ex-2 in namespace executions, an acknowledged write")
	require.Contains(t, r.stdout, "bytes that cannot be read as writes")
	i := strings.Index(r.stdout, "--drop ")
	require.Positive(t, i)
	fingerprint := strings.TrimSpace(r.stdout[i+len("--drop "):])
	after, err := os.ReadFile(log)
	require.NoError(t, err)
	require.Equal(t, data, after, "nothing changed")
	require.Equal(t, exitUnavailable, execfsm(t, "--bolt", crashed, "get", "ex-0").code, "the damaged file does not open")

	r = execfsm(t, "--bolt", crashed, "repair-log", "--drop", "0000000000000000")
	require.Equal(t, exitFailed, r.code)
	require.Contains(t, r.stderr, "changed since it was inspected")

	r = execfsm(t, "--bolt", crashed, "-o", "json", "repair-log", "--drop", fingerprint)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, `"repaired": true`)
	require.Equal(t, exitOK, execfsm(t, "--bolt", crashed, "get", "ex-0").code)
	require.Equal(t, exitFailed, execfsm(t, "--bolt", crashed, "get", "ex-2").code, "ex-2's write was dropped")
	r = execfsm(t, "--bolt", crashed, "repair-log")
	require.Equal(t, exitOK, r.code)
	require.Contains(t, r.stdout, "is whole")
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, data, 0o600))
}

// The operator's trial: a stop reported "at revision 114" while history
// showed 110 for it (the revision it was applied at). History shows the
// revision each change wrote, the one a stop reports.
func TestAStopAndItsHistoryAgreeOnItsRevision(t *testing.T) {
	path := boltFile(t)
	r := execfsm(t, "--bolt", path, "stop", "ex-running", "--reason", "user asked", "--actor", "ops")
	require.Equal(t, 0, r.code, r.stderr)
	m := regexp.MustCompile(`running → stopping at revision (\d+)`).FindStringSubmatch(r.stdout)
	require.NotNil(t, m, r.stdout)
	r = execfsm(t, "--bolt", path, "history", "ex-running")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `running → stopping\s+`+m[1]+`\s+user asked`, r.stdout)
}

// delete removes an ended execution, archived first when asked; a live
// one only with --force; a reason is always needed.
func TestDeleteRemovesWhatHasEnded(t *testing.T) {
	path := boltFile(t)
	kept := filepath.Join(t.TempDir(), "retired.jsonl")
	r := execfsm(t, "--bolt", path, "delete", "ex-done", "--reason", "kept long enough", "--actor", "operator:ana", "--archive", kept)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "ex-done deleted (it was completed")
	r = execfsm(t, "--bolt", path, "get", "ex-done")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "not found")
	archived, err := os.ReadFile(kept)
	require.NoError(t, err)
	require.Contains(t, string(archived), `"reason":"kept long enough"`)

	r = execfsm(t, "--bolt", path, "delete", "ex-running", "--reason", "tidying")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "has not ended")
	r = execfsm(t, "--bolt", path, "delete", "ex-running", "--reason", "a duplicate submission", "--force")
	require.Equal(t, 0, r.code, r.stderr)
	r = execfsm(t, "--bolt", path, "delete", "ex-pending")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "needs --reason")
}
