package etcdstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
)

// SnapshotInfo is what the check of a snapshot read in it.
type SnapshotInfo struct {
	// Revision is the cluster's revision the snapshot is at: every
	// store in it is as it was then, revisions unchanged.
	Revision int64
	// Keys is the number of keys in it, of every prefix.
	Keys int
	// Bytes is the size of the file.
	Bytes int64
}

// Snapshot saves a snapshot of the etcd cluster client reaches to path,
// a file that must not exist: every key of the cluster, this store's and
// any other's, at one revision, as `etcdutl snapshot save` does (etcd's
// documented backup), while writers go on. It then checks the file: the
// SHA-256 etcd appends to a snapshot, and etcdutl's reading of it (its
// revision and keys). A snapshot cut short (ctx ended, a full disk, a
// member gone) leaves no file at path.
//
// Restore it with RestoreSnapshot, or `etcdutl snapshot restore`, into
// the data directory of each member of a new cluster; this store,
// opened with the same prefix on it, is what it was at the snapshot's
// revision.
func Snapshot(ctx context.Context, client *clientv3.Client, path string) (SnapshotInfo, error) {
	if client == nil {
		return SnapshotInfo{}, errors.New("etcdstore: Snapshot: nil client")
	}
	if _, err := os.Lstat(path); err == nil {
		return SnapshotInfo{}, fmt.Errorf("etcdstore: Snapshot: %s: %w", path, os.ErrExist)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".partial-*")
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("etcdstore: Snapshot: %w", err)
	}
	defer func() {
		_ = tmp.Close() // closed already, unless the copy failed
		_ = os.Remove(tmp.Name())
	}()
	stream, err := client.Snapshot(ctx)
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("etcdstore: Snapshot: %w", err)
	}
	_, err = io.Copy(tmp, stream)
	_ = stream.Close()
	if err == nil {
		err = tmp.Sync()
	}
	if err == nil {
		err = tmp.Close()
	}
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("etcdstore: Snapshot: %w", err)
	}
	info, err := CheckSnapshot(tmp.Name())
	if err != nil {
		return SnapshotInfo{}, err
	}
	// A link, not a rename: a file made at path meanwhile is never
	// replaced (its error matches os.ErrExist); the temporary name goes.
	if err := os.Link(tmp.Name(), path); err != nil {
		return SnapshotInfo{}, fmt.Errorf("etcdstore: Snapshot: %w", err)
	}
	return info, nil
}

// CheckSnapshot checks the snapshot at path: the SHA-256 etcd appended
// to it matches its contents, and etcdutl reads its revision and keys.
// The error of a damaged snapshot matches ErrDamagedSnapshot.
func CheckSnapshot(path string) (SnapshotInfo, error) {
	data, err := os.Open(path)
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("etcdstore: %w", err)
	}
	defer data.Close()
	stat, err := data.Stat()
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("etcdstore: %w", err)
	}
	size := stat.Size()
	// etcd appends the SHA-256 of the database to a snapshot it sends, so
	// that its size is a multiple of 512 plus the hash.
	if size%512 != sha256.Size {
		return SnapshotInfo{}, fmt.Errorf("etcdstore: snapshot %s: %w: %d bytes, no hash at its end (not a snapshot etcd sent)", path, ErrDamagedSnapshot, size)
	}
	h := sha256.New()
	if _, err := io.CopyN(h, data, size-sha256.Size); err != nil {
		return SnapshotInfo{}, fmt.Errorf("etcdstore: snapshot %s: %w", path, err)
	}
	want := make([]byte, sha256.Size)
	if _, err := io.ReadFull(data, want); err != nil {
		return SnapshotInfo{}, fmt.Errorf("etcdstore: snapshot %s: %w", path, err)
	}
	if string(h.Sum(nil)) != string(want) {
		return SnapshotInfo{}, fmt.Errorf("etcdstore: snapshot %s: %w: its SHA-256 does not match", path, ErrDamagedSnapshot)
	}
	status, err := snapshot.NewV3(zap.NewNop()).Status(path)
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("etcdstore: snapshot %s: %w: %v", path, ErrDamagedSnapshot, err)
	}
	return SnapshotInfo{Revision: status.Revision, Keys: status.TotalKey, Bytes: size}, nil
}

// ErrDamagedSnapshot is matched by the error of a snapshot that does not
// check out.
var ErrDamagedSnapshot = errors.New("damaged etcd snapshot")

// Member is one member of the cluster a snapshot is restored into: its
// name, its peer URLs, and the data directory (which must not exist)
// the restore makes for it.
type Member struct {
	Name     string
	PeerURLs []string
	DataDir  string
}

// RestoreSnapshot makes the data directory of member, one of members
// (all of the new cluster's, itself included), from the snapshot at
// path, checked first (CheckSnapshot), as `etcdutl snapshot restore`
// does; token is the new cluster's initial cluster token. Start each
// member on its directory with the same name, peer URLs and initial
// cluster.
func RestoreSnapshot(path string, member Member, members []Member, token string) error {
	if _, err := CheckSnapshot(path); err != nil {
		return err
	}
	var cluster string
	for k, m := range members {
		for _, u := range m.PeerURLs {
			if k > 0 || cluster != "" {
				cluster += ","
			}
			cluster += m.Name + "=" + u
		}
	}
	err := snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{SnapshotPath: path, Name: member.Name,
		OutputDataDir: member.DataDir, PeerURLs: member.PeerURLs, InitialCluster: cluster, InitialClusterToken: token})
	if err != nil {
		return fmt.Errorf("etcdstore: restoring %s for %s: %w", path, member.Name, err)
	}
	return nil
}
