package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/etcdstore"
	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/storage"
)

// backend is the store a command works on, and the table recorded in it.
type backend struct {
	store   storage.Store
	lister  storage.Lister
	watcher storage.Watcher // nil for a bbolt file
	// table is the table the store records (schema), nil if it records
	// none: then the CLI reads, and never writes.
	table *schema.Document
}

// open finishes b: it reads the table the store records.
func (b *backend) open(ctx context.Context, g globals) error {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	d, err := schema.Load(ctx, b.store)
	switch {
	case errors.Is(err, schema.ErrNoTable), errors.Is(err, schema.ErrNotKept):
		return nil
	case err != nil:
		return storeError(fmt.Errorf("the table the store records: %w", err))
	}
	b.table = &d
	return nil
}

// withStore opens the store the flags name (a bbolt file read-only
// unless write), runs fn on it and closes it.
func withStore(ctx context.Context, g globals, write bool, fn func(*backend) error) error {
	given := 0
	for _, s := range []string{g.bolt, g.etcd, g.kubeNamespace} {
		if s != "" {
			given++
		}
	}
	switch {
	case given > 1:
		return fail(exitUsage, "--bolt, --etcd and --kube-namespace: give one store")
	case g.bolt != "":
		if _, err := os.Stat(g.bolt); err != nil { // stop must not create a file
			return &failure{code: exitUnavailable, err: err}
		}
		db, err := boltstore.Open(g.bolt, boltstore.Options{ReadOnly: !write})
		switch {
		case errors.Is(err, boltstore.ErrLocked):
			return errLocked(g.bolt, err)
		case err != nil:
			return &failure{code: exitUnavailable, err: err}
		}
		defer db.Close()
		if write {
			// Store would create a namespace the file lacks: a stop
			// must write nothing where nothing is.
			names, err := db.Namespaces()
			if err != nil {
				return &failure{code: exitFailed, err: err}
			}
			if !slices.Contains(names, g.namespace) {
				return errNoNamespace(db, g)
			}
		}
		s, err := db.Store(g.namespace)
		if errors.Is(err, storage.ErrNotFound) {
			return errNoNamespace(db, g)
		}
		if err != nil {
			return &failure{code: exitFailed, err: err}
		}
		return openThen(ctx, g, &backend{store: s, lister: s}, fn)
	case g.kubeNamespace != "":
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = g.kubeconfig
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
			&clientcmd.ConfigOverrides{CurrentContext: g.kubeContext}).ClientConfig()
		if err != nil {
			return &failure{code: exitUnavailable, err: fmt.Errorf("kubeconfig: %w", err)}
		}
		cfg.Timeout = g.timeout
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return &failure{code: exitUnavailable, err: fmt.Errorf("kubernetes client: %w", err)}
		}
		s, err := kube.New(client, kube.Options{Namespace: g.kubeNamespace, Prefix: g.kubePrefix, Timeout: g.timeout})
		if err != nil {
			return fail(exitUsage, "%v", err)
		}
		return openThen(ctx, g, &backend{store: s, lister: s, watcher: s}, fn)
	case g.etcd != "":
		endpoints := strings.Split(g.etcd, ",")
		client, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: g.timeout, Logger: zap.NewNop(), Context: ctx})
		if err != nil {
			return &failure{code: exitUnavailable, err: fmt.Errorf("etcd %s: %w", g.etcd, err)}
		}
		defer client.Close()
		s, err := etcdstore.New(client, etcdstore.Options{Prefix: g.etcdPrefix, Timeout: g.timeout})
		if err != nil {
			return fail(exitUsage, "%v", err)
		}
		return openThen(ctx, g, &backend{store: s, lister: s, watcher: s}, fn)
	}
	return fail(exitUsage, "no store: give --bolt PATH, --etcd ENDPOINTS or --kube-namespace NS")
}

// openThen reads the table b's store records, then runs fn.
func openThen(ctx context.Context, g globals, b *backend, fn func(*backend) error) error {
	if err := b.open(ctx, g); err != nil {
		return err
	}
	return fn(b)
}

// errNoNamespace says that a bbolt file lacks the namespace asked for,
// naming those it holds.
func errNoNamespace(db *boltstore.DB, g globals) error {
	names, err := db.Namespaces()
	if err != nil {
		return &failure{code: exitFailed, err: err}
	}
	if len(names) == 0 {
		return fail(exitFailed, "%s holds no namespace yet: nothing has been written to it", g.bolt)
	}
	return fail(exitFailed, "%s has no namespace %q; it holds %s: give --namespace", g.bolt, g.namespace, strings.Join(names, ", "))
}
