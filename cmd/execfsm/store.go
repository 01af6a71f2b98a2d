package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/etcdstore"
	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/storage"
)

// backend is the store a command works on.
type backend struct {
	store   storage.Store
	lister  storage.Lister
	watcher storage.Watcher // nil for a bbolt file
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
		s, err := db.Store(g.namespace)
		if err != nil {
			return &failure{code: exitFailed, err: err}
		}
		return fn(&backend{store: s, lister: s})
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
		return fn(&backend{store: s, lister: s, watcher: s})
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
		return fn(&backend{store: s, lister: s, watcher: s})
	}
	return fail(exitUsage, "no store: give --bolt PATH, --etcd ENDPOINTS or --kube-namespace NS")
}
