package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/execfsm/execfsm/admin"
	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/etcdstore"
	"github.com/execfsm/execfsm/kube"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// runBackup writes a backup of the store to --to, a file that must not
// exist: a bbolt file's consistent copy with its log folded in, an etcd
// snapshot (the whole cluster's) checked, a Kubernetes namespace's
// records exported at one revision.
func runBackup(ctx context.Context, in invocation) error {
	var to string
	sub := newSub(in.name)
	sub.StringVar(&to, "to", "", "")
	if err := parseFlagsOnly(sub, in.args); err != nil {
		return err
	}
	if to == "" {
		return fail(exitUsage, "backup needs --to FILE, a file that does not exist yet")
	}
	if _, err := os.Lstat(to); err == nil {
		return fail(exitUsage, "backup --to %s: the file exists; a backup never overwrites one", to)
	}
	g := in.g
	switch {
	case stores(g) > 1:
		return fail(exitUsage, "--bolt, --etcd, --kube-namespace and --http: give one store")
	case g.http != "":
		c, err := httpClient(g)
		if err != nil {
			return err
		}
		return backupThrough(ctx, c, to, in.out)
	case g.bolt != "":
		db, err := boltstore.Open(g.bolt, boltstore.Options{ReadOnly: true})
		switch {
		case errors.Is(err, boltstore.ErrLocked):
			return errLocked(g.bolt, err)
		case err != nil:
			return &failure{code: exitUnavailable, err: err}
		}
		defer db.Close()
		info, err := db.Backup(ctx, to)
		if err != nil {
			return &failure{code: exitFailed, err: err}
		}
		return in.out.backedUp(to, "revision", info.Revision, info.Bytes)
	case g.etcd != "":
		cfg, err := etcdConfig(ctx, g)
		if err != nil {
			return err
		}
		client, err := clientv3.New(cfg)
		if err != nil {
			return &failure{code: exitUnavailable, err: fmt.Errorf("etcd %s: %w", g.etcd, err)}
		}
		defer client.Close()
		info, err := etcdstore.Snapshot(ctx, client, to)
		if err != nil {
			return &failure{code: exitFailed, err: err}
		}
		return in.out.backedUp(to, "revision", uint64(info.Revision), info.Bytes)
	case g.kubeNamespace != "":
		s, err := kubeStore(g)
		if err != nil {
			return err
		}
		return exportTo(ctx, s, to, in.out)
	}
	return fail(exitUsage, "no store: give --bolt PATH, --etcd ENDPOINTS or --kube-namespace NS")
}

// backupThrough writes the backup a live controller's admin handler
// makes to the file to, created anew; a failed one leaves no file.
func backupThrough(ctx context.Context, c *admin.Client, to string, out *printer) error {
	var revision uint64
	var size int64
	err := writeNewFile(to, func(w io.Writer) (err error) {
		revision, size, err = c.Backup(ctx, w)
		return err
	})
	if err != nil {
		return err
	}
	return out.backedUp(to, "revision", revision, size)
}

// writeNewFile creates the file to, which must not exist, writes it with
// write and flushes it; a write that fails leaves no file.
func writeNewFile(to string, write func(io.Writer) error) error {
	f, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fail(exitUsage, "backup --to: %v", err)
	}
	err = write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(to)
		return storeError(err)
	}
	return nil
}

// exportTo exports the Kubernetes store to the file to, created anew; a
// failed export leaves no file.
func exportTo(ctx context.Context, s *kube.Store, to string, out *printer) error {
	var info kube.ExportInfo
	err := writeNewFile(to, func(w io.Writer) (err error) {
		info, err = s.Export(ctx, w)
		return err
	})
	if err != nil {
		return err
	}
	stat, err := os.Stat(to)
	if err != nil {
		return &failure{code: exitFailed, err: err}
	}
	if err := out.backedUp(to, "resourceVersion", info.ResourceVersion, stat.Size()); err != nil {
		return err
	}
	if len(info.Unreadable) > 0 {
		return fail(exitFailed, "%d record(s) could not be read and are not in the backup: %s first", len(info.Unreadable), info.Unreadable[0].ID)
	}
	return nil
}

// runRestore restores a backup made by backup: a bbolt backup copied to
// --bolt PATH (which must not exist), a Kubernetes export imported into
// --kube-namespace, an etcd snapshot made into a new member's data
// directory (--etcd-data-dir, with --etcd-name and --etcd-peer-url of
// the member that will start on it).
func runRestore(ctx context.Context, in invocation) error {
	var from, dataDir, name, peer string
	sub := newSub(in.name)
	sub.StringVar(&from, "from", "", "")
	sub.StringVar(&dataDir, "etcd-data-dir", "", "")
	sub.StringVar(&name, "etcd-name", "default", "")
	sub.StringVar(&peer, "etcd-peer-url", "http://localhost:2380", "")
	if err := parseFlagsOnly(sub, in.args); err != nil {
		return err
	}
	if from == "" {
		return fail(exitUsage, "restore needs --from FILE, a backup made by backup")
	}
	g := in.g
	switch {
	case stores(g)+btoi(dataDir != "") != 1:
		return fail(exitUsage, "restore into one of --bolt PATH, --kube-namespace NS or --etcd-data-dir DIR")
	case g.bolt != "":
		return restoreBolt(from, g.bolt, in.out)
	case dataDir != "":
		m := etcdstore.Member{Name: name, PeerURLs: []string{peer}, DataDir: dataDir}
		if err := etcdstore.RestoreSnapshot(from, m, []etcdstore.Member{m}, "execfsm-restored"); err != nil {
			return &failure{code: exitFailed, err: err}
		}
		return in.out.restored(dataDir, "start etcd on it with --name "+name+" --initial-advertise-peer-urls "+peer+" --initial-cluster "+name+"="+peer)
	case g.kubeNamespace != "":
		s, err := kubeStore(g)
		if err != nil {
			return err
		}
		f, err := os.Open(from)
		if err != nil {
			return fail(exitUsage, "restore --from: %v", err)
		}
		defer f.Close()
		n, err := s.Import(ctx, f)
		if err != nil {
			return &failure{code: exitFailed, err: fmt.Errorf("%d record(s) imported before: %w", n, err)}
		}
		return in.out.restored(g.kubeNamespace, fmt.Sprintf("%d record(s) imported", n))
	}
	return fail(exitUsage, "restore into --bolt PATH, --kube-namespace NS or --etcd-data-dir DIR")
}

// restoreBolt copies the bbolt backup from to path, which must not exist,
// and checks that it opens.
func restoreBolt(from, path string, out *printer) error {
	src, err := os.Open(from)
	if err != nil {
		return fail(exitUsage, "restore --from: %v", err)
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".restoring-*")
	if err != nil {
		return &failure{code: exitFailed, err: err}
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	_, err = io.Copy(tmp, src)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return &failure{code: exitFailed, err: err}
	}
	db, err := boltstore.Open(tmp.Name(), boltstore.Options{ReadOnly: true})
	if err != nil {
		return &failure{code: exitFailed, err: fmt.Errorf("%s is not a database boltstore opens: %w", from, err)}
	}
	err = db.Check()
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return &failure{code: exitFailed, err: fmt.Errorf("%s does not check out: %w", from, err)}
	}
	if err := os.Link(tmp.Name(), path); err != nil { // never over an existing file
		return fail(exitUsage, "restore into --bolt %s: %v", path, err)
	}
	_ = os.Remove(tmp.Name())
	done = true
	return out.restored(path, "open it with boltstore.Open, or start the controller on it")
}

// stores counts the stores the flags name.
func stores(g globals) int {
	n := 0
	for _, s := range []string{g.bolt, g.etcd, g.kubeNamespace, g.http} {
		n += btoi(s != "")
	}
	return n
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// kubeStore is the Kubernetes store the flags name.
func kubeStore(g globals) (*kube.Store, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = g.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: g.kubeContext}).ClientConfig()
	if err != nil {
		return nil, &failure{code: exitUnavailable, err: fmt.Errorf("kubeconfig: %w", err)}
	}
	cfg.Timeout = g.timeout
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, &failure{code: exitUnavailable, err: fmt.Errorf("kubernetes client: %w", err)}
	}
	s, err := kube.New(client, kube.Options{Namespace: g.kubeNamespace, Prefix: g.kubePrefix, Timeout: g.timeout})
	if err != nil {
		return nil, fail(exitUsage, "%v", err)
	}
	return s, nil
}
