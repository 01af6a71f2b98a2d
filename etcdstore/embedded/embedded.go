// Package embedded runs etcd inside the current process, on loopback, for
// tests and for examples that must work with nothing installed. It starts
// single servers and multi-member clusters with go.etcd.io/etcd/server's
// embed package, keeps their data in a directory the caller owns, and
// silences their logs.
//
// It is not for production: a real deployment runs etcd as its own
// service.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"github.com/execfsm/execfsm/etcdstore"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// StartTimeout bounds how long Start and Restart wait for members to be
// ready.
const StartTimeout = 60 * time.Second

// Cluster is a running etcd cluster of one or more members.
type Cluster struct {
	mu      sync.Mutex
	members []*member
	release func() // lets the members' ports go; once, by Close
}

type member struct {
	cfg     *embed.Config
	etcd    *embed.Etcd
	client  string // client URL
	running bool
}

// Options tune a cluster; the zero value suits tests.
type Options struct {
	// Compaction, if positive, makes etcd compact its history every
	// interval (auto-compaction, periodic mode).
	Compaction time.Duration
	// QuotaBytes, if positive, is how large each member's database may
	// grow (etcd's --quota-backend-bytes); zero is etcd's default, 2 GiB.
	// Past it etcd refuses writes ("database space exceeded").
	QuotaBytes int64
	// ClientTLS, if set, makes the members serve their clients over TLS
	// (https:// endpoints), as a production etcd does. Client then no
	// longer connects: make a client with the TLS configuration it
	// needs.
	ClientTLS *TLSFiles
	// Snapshot, if set, is an etcd snapshot (etcdstore.Snapshot) each
	// member's data directory is restored from before it starts: the
	// cluster starts as the one the snapshot was taken of was then.
	Snapshot string
}

// TLSFiles are PEM files of a member's client TLS.
type TLSFiles struct {
	CertFile, KeyFile string // the member's certificate and private key
	// TrustedCAFile, if set, makes the member require a client
	// certificate this CA signed.
	TrustedCAFile string
}

// Start starts a cluster of n members (1 for a single server) with their
// data under dir, and waits until every member is ready.
func Start(dir string, n int, opts Options) (*Cluster, error) {
	if n < 1 || n > 7 {
		return nil, fmt.Errorf("embedded: %d members, want 1 to 7", n)
	}
	c := &Cluster{}
	var peers []string
	urls, release, err := freeURLs(2 * n)
	if err != nil {
		return nil, err
	}
	c.release = sync.OnceFunc(release)
	for i := range n {
		peerURL, clientURL := urls[2*i], urls[2*i+1]
		if opts.ClientTLS != nil {
			clientURL.Scheme = "https"
		}
		cfg := embed.NewConfig()
		cfg.Name = fmt.Sprintf("m%d", i)
		cfg.Dir = filepath.Join(dir, cfg.Name)
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*peerURL}, []url.URL{*peerURL}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*clientURL}, []url.URL{*clientURL}
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		cfg.InitialClusterToken = "execfsm-embedded"
		// Passwords (when a test turns authentication on) are hashed at
		// bcrypt's lowest cost: every request of a user checks its
		// password, and a test makes many. Not for production.
		cfg.BcryptCost = 4
		// Beside the reservations of the member's ports, held until Close.
		cfg.SocketOpts.ReusePort = reusePorts
		if t := opts.ClientTLS; t != nil {
			cfg.ClientTLSInfo = transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.TrustedCAFile, ClientCertAuth: t.TrustedCAFile != ""}
		}
		if opts.Compaction > 0 {
			cfg.AutoCompactionMode = "periodic"
			cfg.AutoCompactionRetention = opts.Compaction.String()
		}
		if opts.QuotaBytes > 0 {
			cfg.QuotaBackendBytes = opts.QuotaBytes
		}
		peers = append(peers, cfg.Name+"="+peerURL.String())
		c.members = append(c.members, &member{cfg: cfg, client: clientURL.String()})
	}
	for _, m := range c.members {
		m.cfg.InitialCluster = strings.Join(peers, ",")
	}
	if opts.Snapshot != "" {
		if err := c.restore(opts.Snapshot); err != nil {
			c.Close()
			return nil, err
		}
	}
	// Members of a new cluster wait for each other, so start them all
	// before waiting for any.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, m := range c.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.start(m)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// restore makes every member's data directory from snapshot.
func (c *Cluster) restore(snapshot string) error {
	var all []etcdstore.Member
	for _, m := range c.members {
		all = append(all, etcdstore.Member{Name: m.cfg.Name, PeerURLs: []string{m.cfg.AdvertisePeerUrls[0].String()}, DataDir: m.cfg.Dir})
	}
	for _, m := range all {
		if err := etcdstore.RestoreSnapshot(snapshot, m, all, c.members[0].cfg.InitialClusterToken); err != nil {
			return fmt.Errorf("embedded: %w", err)
		}
	}
	return nil
}

func (c *Cluster) start(m *member) error {
	e, err := embed.StartEtcd(m.cfg)
	if err != nil {
		return fmt.Errorf("embedded: start %s: %w", m.cfg.Name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("embedded: %s: %w", m.cfg.Name, err)
	case <-time.After(StartTimeout):
		e.Close()
		return fmt.Errorf("embedded: %s not ready after %v", m.cfg.Name, StartTimeout)
	}
	c.mu.Lock()
	m.etcd, m.running = e, true
	c.mu.Unlock()
	return nil
}

// freeURLs returns n http URLs on loopback ports, all different, and
// the function that lets them go. A member needs its peers' URLs before
// any of them listens, so the ports are chosen first and bound by etcd
// after: where reusePorts, they stay reserved until release (see
// reservePort); elsewhere they are let go once all are chosen (a port let
// go at once can be handed out again by the next choice, and two members
// given one port fail to start).
func freeURLs(n int) (urls []*url.URL, release func(), err error) {
	var releases []func()
	release = func() {
		for _, r := range releases {
			r()
		}
	}
	for range n {
		port, r, err := reservePort()
		if err != nil {
			release()
			return nil, nil, fmt.Errorf("embedded: no free port: %w", err)
		}
		releases = append(releases, r)
		urls = append(urls, &url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))})
	}
	if !reusePorts {
		release()
		release = func() {}
	}
	return urls, release, nil
}

// Endpoints returns the client URLs of every member, running or not.
func (c *Cluster) Endpoints() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.members {
		out = append(out, m.client)
	}
	return out
}

// Endpoint returns the client URL of member i.
func (c *Cluster) Endpoint(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.members[i].client
}

// Client returns a client of the whole cluster; the caller closes it.
func (c *Cluster) Client() (*clientv3.Client, error) { return NewClient(c.Endpoints()) }

// NewClient returns a quiet client of the given endpoints (of this
// package's clusters or any other); the caller closes it.
func NewClient(endpoints []string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
}

// Size returns the number of members.
func (c *Cluster) Size() int { return len(c.members) }

// Leader returns the index of the member that is leader now, or -1.
func (c *Cluster) Leader() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, m := range c.members {
		if m.running && m.etcd.Server.Leader() == m.etcd.Server.MemberID() {
			return i
		}
	}
	return -1
}

// WaitLeader waits until some running member is leader.
func (c *Cluster) WaitLeader(ctx context.Context) (int, error) {
	for {
		if i := c.Leader(); i >= 0 {
			return i, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("embedded: no leader: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop stops member i; its data stays for Restart.
func (c *Cluster) Stop(i int) {
	c.mu.Lock()
	m := c.members[i]
	running := m.running
	m.running = false
	c.mu.Unlock()
	if running {
		m.etcd.Close()
	}
}

// Restart starts stopped member i again from its data.
func (c *Cluster) Restart(i int) error {
	c.mu.Lock()
	m := c.members[i]
	if m.running {
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	return c.start(m)
}

// Close stops every member.
func (c *Cluster) Close() {
	for i := range c.members {
		c.Stop(i)
	}
	if c.release != nil {
		c.release()
	}
}

// LingeringGoroutines names the functions at the top of goroutines an
// embedded etcd leaves behind for a while after Close: the peer HTTP
// connections (rafthttp, over net/http and cmux) of a member that was
// stopped or restarted idle out on their own. A test that checks for
// leaked goroutines ignores them (goleak.IgnoreAnyFunction of each).
var LingeringGoroutines = []string{
	"net/http.(*persistConn).readLoop",
	"net/http.(*persistConn).writeLoop",
	"net/http.(*conn).serve",
	"github.com/soheilhy/cmux.(*MuxConn).Read",
}
