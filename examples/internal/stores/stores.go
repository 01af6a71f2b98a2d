// Package stores opens the store an example runs on, chosen by one flag:
// memory, bolt (a file in a temporary directory) or etcd (an embedded
// etcd in-process, or an existing cluster). A parent sets a backend up
// and hands its Config to child processes, which open it themselves.
package stores

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/execfsm/execfsm/storage"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/etcdstore"
	"github.com/execfsm/execfsm/etcdstore/embedded"
)

// Flags are the store flags of an example.
type Flags struct {
	Kind string // memory, bolt or etcd
	Etcd string // comma-separated endpoints of an existing cluster
}

// Register adds -store and -etcd to fs with the given default kind.
func (f *Flags) Register(fs *flag.FlagSet, kind string) {
	fs.StringVar(&f.Kind, "store", kind, "where executions live: memory, bolt or etcd")
	fs.StringVar(&f.Etcd, "etcd", "", "with -store etcd: endpoints of an existing cluster (default: start one in-process)")
}

// Config is how a process reaches the store; it travels to children as
// JSON.
type Config struct {
	Kind     string   `json:"kind"`
	Etcd     []string `json:"etcd,omitempty"`
	Prefix   string   `json:"prefix,omitempty"`
	BoltPath string   `json:"bolt_path,omitempty"`
}

// Setup prepares the backend under dir (a bolt file, an embedded etcd)
// and returns its Config and a function that stops what it started.
func (f *Flags) Setup(dir string) (Config, func(), error) {
	switch f.Kind {
	case "memory":
		return Config{Kind: "memory"}, func() {}, nil
	case "bolt":
		return Config{Kind: "bolt", BoltPath: filepath.Join(dir, "executions.db")}, func() {}, nil
	case "etcd":
		cfg := Config{Kind: "etcd", Prefix: fmt.Sprintf("/execfsm-example-%d/", os.Getpid())}
		if f.Etcd != "" {
			cfg.Etcd = strings.Split(f.Etcd, ",")
			return cfg, func() {}, nil
		}
		c, err := embedded.Start(filepath.Join(dir, "etcd"), 1, embedded.Options{})
		if err != nil {
			return Config{}, nil, err
		}
		cfg.Etcd = c.Endpoints()
		return cfg, c.Close, nil
	}
	return Config{}, nil, fmt.Errorf("unknown -store %q: want memory, bolt or etcd", f.Kind)
}

// Open sets the backend up in a temporary directory and opens it, for an
// example that runs in one process. The function closes and removes all.
func (f *Flags) Open() (storage.Store, func(), error) {
	dir, err := os.MkdirTemp("", "execfsm-example-")
	if err != nil {
		return nil, nil, err
	}
	cfg, stop, err := f.Setup(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, err
	}
	s, closeStore, err := cfg.Open()
	if err != nil {
		stop()
		_ = os.RemoveAll(dir)
		return nil, nil, err
	}
	return s, func() { closeStore(); stop(); _ = os.RemoveAll(dir) }, nil
}

// Open connects to the store. A bolt file is locked until the function is
// called: one process at a time.
func (c Config) Open() (storage.Store, func(), error) {
	switch c.Kind {
	case "memory":
		return storage.NewMemory(), func() {}, nil
	case "bolt":
		db, err := boltstore.Open(c.BoltPath, boltstore.Options{Timeout: 10 * time.Second})
		if err != nil {
			return nil, nil, err
		}
		s, err := db.Store("executions")
		if err != nil {
			_ = db.Close()
			return nil, nil, err
		}
		return s, func() { _ = db.Close() }, nil
	case "etcd":
		client, err := embedded.NewClient(c.Etcd)
		if err != nil {
			return nil, nil, err
		}
		s, err := etcdstore.New(client, etcdstore.Options{Prefix: c.Prefix, Timeout: 5 * time.Second})
		if err != nil {
			_ = client.Close()
			return nil, nil, err
		}
		return s, func() { _ = client.Close() }, nil
	}
	return nil, nil, fmt.Errorf("unknown store kind %q", c.Kind)
}
