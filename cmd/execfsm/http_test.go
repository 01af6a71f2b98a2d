package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/execfsm/execfsm/admin"
	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/schema/schematest"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
)

// liveController is a bbolt file held open by a "controller" (this test),
// its admin handler served over real HTTP on 127.0.0.1.
type liveController struct {
	url  string
	path string
}

func serveLive(t *testing.T, opts admin.HandlerOptions, tlsCfg *tls.Config) liveController {
	t.Helper()
	return serveFile(t, boltFile(t), opts, tlsCfg)
}

// serveFile serves the bbolt file at path as serveLive does.
func serveFile(t *testing.T, path string, opts admin.HandlerOptions, tlsCfg *tls.Config) liveController {
	t.Helper()
	db, err := boltstore.Open(path, boltstore.Options{})
	require.NoError(t, err)
	s, err := db.Store("executions")
	require.NoError(t, err)
	opts.Path = "/admin/"
	opts.Backup = func(ctx context.Context, path string) (uint64, error) { // as a controller serves them
		info, err := db.Backup(ctx, path)
		return info.Revision, err
	}
	h, err := admin.NewHandler(s, opts)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/admin/", h)
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes the test makes
	if tlsCfg != nil {
		srv.TLS = tlsCfg
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(func() {
		h.Close()
		srv.Close()
		require.NoError(t, db.Close())
	})
	return liveController{url: srv.URL + "/admin/", path: path}
}

// TestEveryReadCommandAnswersTheSameThroughALiveControllersHandler: the
// bbolt file a running controller holds cannot be opened (exit 3), and
// through its handler every read command prints what it prints against
// the file: the same golden files.
func TestEveryReadCommandAnswersTheSameThroughALiveControllersHandler(t *testing.T) {
	live := serveLive(t, admin.HandlerOptions{}, nil)
	r := execfsm(t, "--bolt", live.path, "get", "ex-moving")
	require.Equal(t, 3, r.code, "the controller holds the file")
	readGolden(t, "--http", live.url)
	r = execfsm(t, "--http", live.url, "diagram")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, execfsm(t, "diagram").stdout, r.stdout, "the recorded table is Teraslice's")
	r = execfsm(t, "--http", live.url, "get", "ex-nobody")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "not found")
	r = execfsm(t, "--http", live.url, "list", "--status", "sleeping")
	require.Equal(t, 2, r.code, "a status the recorded table lacks is a usage error, as against a store")
	require.True(t, strings.HasPrefix(r.stderr, `execfsm: admin: list: invalid request: "sleeping" is not a status of table teraslice`), r.stderr)
	require.NotContains(t, r.stderr, "usage: execfsm", "the handler's error, not the usage")
	// Watch a bbolt file's records while its controller writes them: what
	// no command could do before the handler.
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	var out syncBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"--http", live.url, "watch", "ex-running"}, &out, &out) }()
	waitFor(t, &out, "current    ex-running  running")
	r = execfsm(t, "--http", live.url, "stop", "ex-running", "--reason", "user asked")
	require.Equal(t, 1, r.code, "no authorizer: no writes")
	require.Contains(t, r.stderr, "this controller accepts no writes (it configured no authorizer)")
	cancel()
	select {
	case code := <-done:
		require.Equal(t, 0, code, out.String())
	case <-time.After(bound):
		t.Fatal("watch did not end with its context")
	}
}

// TestStopThroughALiveControllersHandlerOverTLSWithAUser: the operator
// presents a client certificate over TLS and a user whose password comes
// from the environment; the handler's authorizer names the writer.
func TestStopThroughALiveControllersHandlerOverTLSWithAUser(t *testing.T) {
	pki := newPKI(t)
	authorize := func(r *http.Request, a admin.Operation) (string, error) {
		if len(r.TLS.PeerCertificates) == 0 {
			return "", errors.New("no client certificate")
		}
		user, pass, ok := r.BasicAuth()
		if !ok || user != "ana" || pass != "correct horse" {
			return "", admin.ErrUnauthenticated
		}
		return "operator:" + user + " (" + r.TLS.PeerCertificates[0].Subject.CommonName + ")", nil
	}
	live := serveLive(t, admin.HandlerOptions{Authorize: authorize}, pki.serverTLS(t))
	secure := []string{"--http", live.url, "--cacert", pki.ca, "--cert", pki.clientCert, "--key", pki.clientKey, "--user", "ana"}

	t.Setenv(envPassword, "wrong")
	r := execfsm(t, append(secure, "get", "ex-running")...)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "unauthenticated")

	t.Setenv(envPassword, "correct horse")
	r = execfsm(t, append(secure, "stop", "ex-running", "--reason", "user asked")...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "ex-running: running → stopping at revision 18, by operator:ana (execfsm operator): user asked\n", r.stdout)
	r = execfsm(t, append(secure, "-o", "json", "stop", "ex-running", "--reason", "again")...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"changed": false`)
	r = execfsm(t, append(secure, "stop", "ex-done", "--reason", "too late")...)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "completed is terminal")

	// Without the CA the server is not trusted; without the client
	// certificate the TLS handshake is refused: nothing reaches it.
	r = execfsm(t, "--http", live.url, "get", "ex-running")
	require.Equal(t, 3, r.code, r.stderr)
	require.Contains(t, r.stderr, "certificate")
	r = execfsm(t, "--http", live.url, "--cacert", pki.ca, "get", "ex-running")
	require.Equal(t, 3, r.code, r.stderr)
}

func TestSecurityFlagsAreRefusedWhereTheyMeanNothing(t *testing.T) {
	path := boltFile(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--bolt", path, "--cacert", "ca.pem", "list"}, "are for --etcd and --http"},
		{[]string{"--etcd", "127.0.0.1:1", "--cert", "c.pem", "list"}, "--cert and --key go together"},
		{[]string{"--etcd", "127.0.0.1:1", "--user", "ana:secret", "list"}, "a password on the command line is in the process list"},
		{[]string{"--http", "http://ctl.example:8080/admin/", "--user", "ana", "list"}, "would send the password unencrypted"},
		{[]string{"--http", "http://127.0.0.1:1/admin/", "--cacert", "ca.pem", "list"}, "need an https:// URL"},
		{[]string{"--http", "ftp://127.0.0.1/", "list"}, "want the URL of a controller's admin handler"},
		{[]string{"--http", "http://127.0.0.1:1/", "repair-log"}, "repair-log works on a bbolt file"},
	} {
		t.Setenv(envPassword, "x")
		r := execfsm(t, tc.args...)
		require.Equal(t, 2, r.code, "%q: %s", tc.args, r.stderr)
		require.Contains(t, r.stderr, tc.want, "%q", tc.args)
	}
	// No password and no terminal to ask on.
	require.NoError(t, os.Unsetenv(envPassword))
	r := execfsm(t, "--http", "http://127.0.0.1:1/admin/", "--user", "ana", "list")
	require.Equal(t, 2, r.code, r.stderr)
	require.Contains(t, r.stderr, "set EXECFSM_PASSWORD (there is no terminal to ask on)")
}

// pki is a CA and the certificates it signed, as PEM files.
type pki struct {
	ca, serverCert, serverKey, clientCert, clientKey string
	pool                                             *x509.CertPool
}

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "execfsm test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	p := pki{ca: filepath.Join(dir, "ca.pem"), pool: x509.NewCertPool()}
	p.pool.AddCert(caCert)
	writePEM(t, p.ca, "CERTIFICATE", caDER)
	issue := func(serial int64, name string, usage x509.ExtKeyUsage, ips []net.IP) (string, string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		require.NoError(t, err)
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		require.NoError(t, err)
		cert, keyPath := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		writePEM(t, cert, "CERTIFICATE", der)
		writePEM(t, keyPath, "PRIVATE KEY", keyDER)
		return cert, keyPath
	}
	p.serverCert, p.serverKey = issue(2, "server", x509.ExtKeyUsageServerAuth, []net.IP{net.IPv4(127, 0, 0, 1)})
	p.clientCert, p.clientKey = issue(3, "execfsm operator", x509.ExtKeyUsageClientAuth, nil)
	return p
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600))
}

// serverTLS is a server's TLS that requires a client certificate of the
// CA.
func (p pki) serverTLS(t *testing.T) *tls.Config {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(p.serverCert, p.serverKey)
	require.NoError(t, err)
	return &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: p.pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
}

// envRunAsCLI makes the test binary run the command with the arguments
// it holds (JSON).
const envRunAsCLI = "EXECFSM_TEST_RUN_AS_CLI"

// TestThePasswordIsAskedOnTheTerminal runs the command as a process on a
// real pseudo-terminal, without $EXECFSM_PASSWORD: it asks, reads the
// answer without echoing it, and the stop goes through as the user.
func TestThePasswordIsAskedOnTheTerminal(t *testing.T) {
	authorize := func(r *http.Request, a admin.Operation) (string, error) {
		user, pass, ok := r.BasicAuth()
		if !ok || user != "ana" || pass != "correct horse" {
			return "", admin.ErrUnauthenticated
		}
		return "operator:" + user, nil
	}
	live := serveLive(t, admin.HandlerOptions{Authorize: authorize}, nil)
	args, err := json.Marshal([]string{"--http", live.url, "--user", "ana", "stop", "ex-running", "--reason", "asked on a terminal"})
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(without(os.Environ(), envPassword), envRunAsCLI+"="+string(args))
	terminal, err := pty.Start(cmd)
	require.NoError(t, err)
	defer terminal.Close()
	var screen syncBuffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		_, _ = io.Copy(&screen, terminal) // ends with an error when the command exits
	}()
	waitFor(t, &screen, "Password for ana: ")
	_, err = terminal.Write([]byte("correct horse\r"))
	require.NoError(t, err)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		require.NoError(t, err, screen.String())
	case <-time.After(bound):
		_ = cmd.Process.Kill()
		t.Fatalf("the command did not finish after the password:\n%s", screen.String())
	}
	select {
	case <-read: // the terminal closes with the command
	case <-time.After(bound):
		t.Fatal("the terminal was still open after the command exited")
	}
	require.Contains(t, screen.String(), "ex-running: running → stopping at revision 18, by operator:ana: asked on a terminal")
	require.NotContains(t, screen.String(), "correct horse", "the password is not echoed")
}

// without returns env without the variable name.
func without(env []string, name string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// The operator's trial: through an older controller's handler, a stop of
// a job in a status only a newer table has is refused unless forced, and
// a stop nobody acts on soon says so.
func TestAStopTheServingControllerWouldNotActOnIsRefusedUnlessForced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := boltstore.Open(path, boltstore.Options{})
	require.NoError(t, err)
	s, err := db.Store("executions")
	require.NoError(t, err)
	v1, v2 := schematest.CIJobs(t, ""), schematest.CIJobs(t, "quarantined")
	_, err = schema.Save(bg, s, "ci-jobs", v1)
	require.NoError(t, err)
	_, err = schema.Save(bg, s, "ci-jobs", v2)
	require.NoError(t, err)
	exec, err := transition.NewPersisted(v2.Table(), s, "job-q", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	_, err = exec.Create(bg, transition.To("queued"))
	require.NoError(t, err)
	_, err = exec.Walk(bg, "quarantined", "held by an operator")
	require.NoError(t, err)
	require.NoError(t, db.Close())

	serves, err := schema.Describe("ci-jobs", v1)
	require.NoError(t, err)
	allow := func(_ *http.Request, a admin.Operation) (string, error) { return a.Actor, nil }
	live := serveFile(t, path, admin.HandlerOptions{Authorize: allow, Serves: serves}, nil)
	r := execfsm(t, "--http", live.url, "stop", "job-q", "--reason", "user asked")
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stderr, "job-q is in quarantined, which this controller's table (ci-jobs version 1) does not know (version 2 of the table knows it)")
	require.Contains(t, r.stderr, "or force the stop")
	require.NotContains(t, r.stderr, "usage: execfsm")
	r = execfsm(t, "--http", live.url, "get", "job-q")
	require.Contains(t, r.stdout, "quarantined", "nothing written")

	r = execfsm(t, "--http", live.url, "stop", "job-q", "--reason", "user asked", "--force")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "job-q: quarantined → draining at revision")
	require.Contains(t, r.stderr, "warning: forced: job-q is in quarantined")
	require.Contains(t, r.stderr, "warning: no controller holds job-q now")
}

// A backup through a live controller's handler is its bbolt file at one
// revision, restored into a new file with the same records; without an
// Authorizer the handler sends no copy of its store.
func TestABackupThroughALiveControllersHandler(t *testing.T) {
	live := serveLive(t, admin.HandlerOptions{Authorize: func(*http.Request, admin.Operation) (string, error) { return "operator", nil }}, nil)
	dir := t.TempDir()
	backup := filepath.Join(dir, "backup.db")
	r := execfsm(t, "--http", live.url, "backup", "--to", backup)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "the store at revision")
	restored := filepath.Join(dir, "restored.db")
	r = execfsm(t, "--bolt", restored, "restore", "--from", backup)
	require.Equal(t, 0, r.code, r.stderr)
	for _, id := range []string{"ex-moving", "ex-running", "ex-done"} {
		before := execfsm(t, "--http", live.url, "-o", "json", "get", id)
		after := execfsm(t, "--bolt", restored, "-o", "json", "get", id)
		require.Equal(t, 0, after.code, after.stderr)
		require.JSONEq(t, before.stdout, after.stdout, "%s is the same record, revision and all", id)
	}

	closed := serveLive(t, admin.HandlerOptions{}, nil)
	r = execfsm(t, "--http", closed.url, "backup", "--to", filepath.Join(dir, "refused.db"))
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stderr, "no copy of its whole store")
	_, err := os.Stat(filepath.Join(dir, "refused.db"))
	require.ErrorIs(t, err, os.ErrNotExist, "a refused backup leaves no file")
}

// A delete through a live controller's handler removes the record from
// the file the controller holds; --archive is the controller's to keep.
func TestADeleteThroughALiveControllersHandler(t *testing.T) {
	live := serveLive(t, admin.HandlerOptions{Authorize: func(*http.Request, admin.Operation) (string, error) { return "operator", nil }}, nil)
	r := execfsm(t, "--http", live.url, "delete", "ex-done", "--reason", "kept long enough")
	require.Equal(t, 0, r.code, r.stderr)
	r = execfsm(t, "--http", live.url, "get", "ex-done")
	require.Equal(t, 1, r.code)
	r = execfsm(t, "--http", live.url, "delete", "ex-pending", "--reason", "x", "--archive", filepath.Join(t.TempDir(), "a.jsonl"))
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "its own archive")
}
