package kube

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/execfsm/execfsm/storage"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TableLabel marks the ConfigMap that holds the table's document (see
// storage.TableKeeper); its value is the store's label, like
// ManagedLabel's on the records, which it does not carry: List and Watch
// never see it.
const TableLabel = "execfsm.io/table"

// TableKey is the key of the table's document in its ConfigMap's data.
const TableKey = "table.json"

var _ storage.TableKeeper = (*Store)(nil)

// TableName returns the name of the ConfigMap holding the table's
// document: the prefix without its dash, then ".table". It has a dot, so
// no record's ConfigMap (Name) can have it.
func (s *Store) TableName() string { return strings.TrimSuffix(s.prefix, "-") + ".table" }

// Table implements [storage.TableKeeper]; the revision is the
// ConfigMap's resourceVersion.
func (s *Store) Table(ctx context.Context) ([]byte, uint64, error) {
	ctx, cancel, err := s.call(ctx, "Table")
	if err != nil {
		return nil, 0, err
	}
	defer cancel()
	cm, err := s.client.CoreV1().ConfigMaps(s.ns).Get(ctx, s.TableName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, 0, fmt.Errorf("kube: table: %w", storage.ErrNotFound)
	case err != nil:
		return nil, 0, wrap("Table", s.TableName(), err)
	}
	doc, ok := cm.Data[TableKey]
	if !ok {
		return nil, 0, fmt.Errorf("kube: ConfigMap %s/%s: %w: no %s", s.ns, cm.Name, storage.ErrCorrupt, TableKey)
	}
	rev, err := parseRevision("ConfigMap", s.ns, cm.Name, cm.ResourceVersion)
	if err != nil {
		return nil, 0, err
	}
	return []byte(doc), rev, nil
}

// SetTable implements [storage.TableKeeper]: a create for expect 0, an
// update at resourceVersion expect otherwise.
func (s *Store) SetTable(ctx context.Context, expect uint64, doc []byte) (uint64, error) {
	if err := storage.CheckTable(doc); err != nil {
		return 0, err
	}
	if len(TableKey)+len(doc) > MaxConfigMapSize {
		return 0, fmt.Errorf("kube: table: %w: %d bytes, over a ConfigMap's %d", storage.ErrInvalidRecord, len(doc), MaxConfigMapSize)
	}
	ctx, cancel, err := s.call(ctx, "SetTable")
	if err != nil {
		return 0, err
	}
	defer cancel()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: s.TableName(), Namespace: s.ns, Labels: map[string]string{TableLabel: s.label()}},
		Data:       map[string]string{TableKey: string(doc)},
	}
	cms := s.client.CoreV1().ConfigMaps(s.ns)
	if expect == 0 {
		cm, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	} else {
		cm.ResourceVersion = strconv.FormatUint(expect, 10)
		cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	switch {
	case apierrors.IsAlreadyExists(err), apierrors.IsConflict(err), apierrors.IsNotFound(err):
		return 0, fmt.Errorf("kube: table: %w: not at revision %d", storage.ErrConflict, expect)
	case err != nil:
		return 0, wrap("SetTable", s.TableName(), err)
	}
	return parseRevision("ConfigMap", s.ns, cm.Name, cm.ResourceVersion)
}
