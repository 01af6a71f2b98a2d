package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/term"

	"github.com/execfsm/execfsm/admin"
)

// envPassword holds the password of --user: an environment variable is
// not in the process list, a flag's value is.
const envPassword = "EXECFSM_PASSWORD"

// checkSecurity refuses the security flags where they mean nothing, and
// a password on the command line.
func checkSecurity(g globals) error {
	given := g.cacert != "" || g.cert != "" || g.key != "" || g.user != ""
	switch {
	case given && g.etcd == "" && g.http == "":
		return fail(exitUsage, "--cacert, --cert, --key and --user are for --etcd and --http (a bbolt file is local; Kubernetes takes them from the kubeconfig)")
	case (g.cert == "") != (g.key == ""):
		return fail(exitUsage, "--cert and --key go together: a client certificate and its private key")
	case strings.Contains(g.user, ":"):
		return fail(exitUsage, "--user takes a name alone: a password on the command line is in the process list and the shell's history; set %s, or let execfsm ask on the terminal", envPassword)
	}
	return nil
}

// password returns the password of --user: from the environment, or
// asked on the terminal.
func password(g globals) (string, error) {
	if pw, ok := os.LookupEnv(envPassword); ok {
		return pw, nil
	}
	fd := int(os.Stdin.Fd())
	if !term.IsTerminal(fd) {
		return "", fail(exitUsage, "--user %s needs a password: set %s (there is no terminal to ask on)", g.user, envPassword)
	}
	fmt.Fprintf(os.Stderr, "Password for %s: ", g.user)
	pw, err := term.ReadPassword(fd)
	fmt.Fprintln(os.Stderr)
	if err != nil {
		return "", &failure{code: exitUsage, err: fmt.Errorf("reading the password: %w", err)}
	}
	return string(pw), nil
}

// tlsConfig is what --cacert, --cert and --key ask for; nil for none.
func tlsConfig(g globals) (*tls.Config, error) {
	if g.cacert == "" && g.cert == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if g.cacert != "" {
		pem, err := os.ReadFile(g.cacert)
		if err != nil {
			return nil, fail(exitUsage, "--cacert: %v", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fail(exitUsage, "--cacert %s: no PEM certificate in it", g.cacert)
		}
	}
	if g.cert != "" {
		pair, err := tls.LoadX509KeyPair(g.cert, g.key)
		if err != nil {
			return nil, fail(exitUsage, "--cert and --key: %v", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// etcdConfig is the etcd client the flags describe.
func etcdConfig(ctx context.Context, g globals) (clientv3.Config, error) {
	cfg := clientv3.Config{Endpoints: strings.Split(g.etcd, ","), DialTimeout: g.timeout, Logger: zap.NewNop(), Context: ctx}
	var err error
	if cfg.TLS, err = tlsConfig(g); err != nil {
		return cfg, err
	}
	if g.user != "" {
		cfg.Username = g.user
		if cfg.Password, err = password(g); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// httpClient is the client of the controller's admin handler the flags
// describe.
func httpClient(g globals) (*admin.Client, error) {
	u, err := url.Parse(g.http)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fail(exitUsage, "--http %q: want the URL of a controller's admin handler, such as http://127.0.0.1:8080/admin/", g.http)
	}
	if (g.cacert != "" || g.cert != "") && u.Scheme != "https" {
		return nil, fail(exitUsage, "--cacert, --cert and --key need an https:// URL, not %s", u.Redacted())
	}
	tlsCfg, err := tlsConfig(g)
	if err != nil {
		return nil, err
	}
	opts := admin.ClientOptions{HTTPClient: &http.Client{Transport: transport(tlsCfg)}}
	if g.user != "" {
		if u.Scheme != "https" && !loopback(u.Hostname()) {
			return nil, fail(exitUsage, "--user over %s would send the password unencrypted: use https://", u.Redacted())
		}
		opts.Username = g.user
		if opts.Password, err = password(g); err != nil {
			return nil, err
		}
	}
	c, err := admin.NewClient(g.http, opts)
	if err != nil {
		return nil, fail(exitUsage, "%v", err)
	}
	return c, nil
}

func transport(tlsCfg *tls.Config) http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = tlsCfg
	return t
}

// loopback reports whether host is this machine (a port-forward, a
// sidecar): nothing crosses a network there.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
