// Package stores opens the store an example runs on, chosen by one flag:
// memory, bolt (a file in a temporary directory) or etcd (an embedded
// etcd in-process, or an existing cluster).
package stores

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/etcdstore"
	"github.com/execfsm/execfsm/etcdstore/embedded"
	"github.com/execfsm/execfsm/transition"
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

// Open returns the store and a function that closes it and removes what
// it created.
func (f *Flags) Open() (transition.Store, func(), error) {
	switch f.Kind {
	case "memory":
		return transition.NewMemoryStore(), func() {}, nil
	case "bolt":
		dir, err := os.MkdirTemp("", "execfsm-bolt-")
		if err != nil {
			return nil, nil, err
		}
		db, err := boltstore.Open(filepath.Join(dir, "executions.db"), nil)
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, nil, err
		}
		s, err := db.Store("executions")
		if err != nil {
			_ = db.Close()
			_ = os.RemoveAll(dir)
			return nil, nil, err
		}
		return s, func() { _ = db.Close(); _ = os.RemoveAll(dir) }, nil
	case "etcd":
		return f.openEtcd()
	}
	return nil, nil, fmt.Errorf("unknown -store %q: want memory, bolt or etcd", f.Kind)
}

func (f *Flags) openEtcd() (transition.Store, func(), error) {
	var cleanups []func()
	cleanup := func() {
		for k := len(cleanups) - 1; k >= 0; k-- {
			cleanups[k]()
		}
	}
	endpoints := strings.Split(f.Etcd, ",")
	if f.Etcd == "" {
		dir, err := os.MkdirTemp("", "execfsm-etcd-")
		if err != nil {
			return nil, nil, err
		}
		cleanups = append(cleanups, func() { _ = os.RemoveAll(dir) })
		c, err := embedded.Start(dir, 1, embedded.Options{})
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		cleanups = append(cleanups, c.Close)
		endpoints = c.Endpoints()
	}
	client, err := embedded.NewClient(endpoints)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	cleanups = append(cleanups, func() { _ = client.Close() })
	s, err := etcdstore.New(client, etcdstore.Options{Prefix: fmt.Sprintf("/execfsm-example-%d/", os.Getpid())})
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return s, cleanup, nil
}
