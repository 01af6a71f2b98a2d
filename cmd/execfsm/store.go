package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/execfsm/execfsm/admin"
	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/etcdstore"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/storage"
)

// backend is what a command works on: a store it opened, or a live
// controller's admin handler (--http), and the table recorded there.
type backend struct {
	op admin.Operator
	// table is the table the store records (schema), nil if it records
	// none: then the CLI reads, and never writes.
	table *schema.Document
}

// open finishes b: it reads the table the store records.
func (b *backend) open(ctx context.Context, g globals) error {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	d, err := b.op.Table(ctx)
	switch {
	case errors.Is(err, schema.ErrNoTable):
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
	switch {
	case stores(g) > 1:
		return fail(exitUsage, "--bolt, --etcd, --kube-namespace and --http: give one store")
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
		return openThen(ctx, g, s, fn)
	case g.http != "":
		c, err := httpClient(g)
		if err != nil {
			return err
		}
		return openOperator(ctx, g, c, fn)
	case g.kubeNamespace != "":
		s, err := kubeStore(g)
		if err != nil {
			return err
		}
		return openThen(ctx, g, s, fn)
	case g.etcd != "":
		cfg, err := etcdConfig(ctx, g)
		if err != nil {
			return err
		}
		client, err := clientv3.New(cfg)
		switch {
		case errors.Is(err, rpctypes.ErrAuthFailed):
			// Reached, and refused: the credentials are wrong, not the
			// cluster.
			return &failure{code: exitFailed, err: fmt.Errorf("etcd %s: %w", g.etcd, err)}
		case err != nil:
			return &failure{code: exitUnavailable, err: fmt.Errorf("etcd %s: %w", g.etcd, err)}
		}
		defer client.Close()
		s, err := etcdstore.New(client, etcdstore.Options{Prefix: g.etcdPrefix, Timeout: g.timeout})
		if err != nil {
			return fail(exitUsage, "%v", err)
		}
		return openThen(ctx, g, s, fn)
	}
	return fail(exitUsage, "no store: give --bolt PATH, --etcd ENDPOINTS, --kube-namespace NS or --http URL")
}

// openThen reads the table recorded in store, then runs fn.
func openThen(ctx context.Context, g globals, store storage.Store, fn func(*backend) error) error {
	op, err := admin.NewStoreOperator(store)
	if err != nil {
		return &failure{code: exitFailed, err: err}
	}
	return openOperator(ctx, g, op, fn)
}

// openOperator reads the table recorded where op works, then runs fn.
func openOperator(ctx context.Context, g globals, op admin.Operator, fn func(*backend) error) error {
	b := &backend{op: op}
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
