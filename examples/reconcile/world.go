package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/execfsm/execfsm/reconcile"
)

// The world is a directory where every simulator keeps, next to its pid,
// what Kubernetes keeps in a Job's labels and annotations: its identity.
// A simulator also writes its own state there and holds a lock on a file
// for as long as it lives, so anyone can tell a live simulator from the
// leftovers of a dead one (even one whose pid was reused).
//
//	<uuid>.json   identity and pid (the "labels")
//	<uuid>.state  the simulator's own state: starting, running, paused, …
//	<uuid>.lock   locked while the process lives

// label is a simulator's identity as the world keeps it.
type label struct {
	UUID     string `json:"uuid"`
	Manager  string `json:"manager"`
	Name     string `json:"name"`
	Location string `json:"location"`
	Realm    string `json:"realm"`
	Owner    string `json:"owner"`
	PID      int    `json:"pid"`
}

// identity is the label as a loop item's identity, with the keys
// VILLAScontroller gives a simulator's Kubernetes Job: the UUIDs as
// labels, the rest as annotations.
func (l label) identity() reconcile.Identity {
	return reconcile.Identity{
		Labels: map[string]string{keyUUID: l.UUID, keyManager: l.Manager},
		Annotations: map[string]string{keyName: l.Name, keyLocation: l.Location,
			keyRealm: l.Realm, keyOwner: l.Owner},
	}
}

// labelOf reads a label back from an identity (or from a record's
// metadata, which keeps the same keys).
func labelOf(labels, annotations map[string]string) label {
	return label{UUID: labels[keyUUID], Manager: labels[keyManager], Name: annotations[keyName],
		Location: annotations[keyLocation], Realm: annotations[keyRealm], Owner: annotations[keyOwner]}
}

// VILLAScontroller's keys for a simulator's identity.
const (
	keyUUID     = "service.villas.io/uuid"
	keyManager  = "manager.villas.io/uuid"
	keyName     = "service.villas.io/name"
	keyLocation = "service.villas.io/location"
	keyRealm    = "service.villas.io/realm"
	keyOwner    = "service.villas.io/owner"
)

type world struct{ dir string }

func (w world) path(uuid, ext string) string { return filepath.Join(w.dir, uuid+ext) }

// writeFile replaces a file atomically, so a reader never sees half.
func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// alive reports whether the simulator uuid holds its lock.
func (w world) alive(uuid string) bool {
	f, err := os.Open(w.path(uuid, ".lock"))
	if err != nil {
		return false
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return false
	}
	return errors.Is(err, syscall.EWOULDBLOCK)
}

// labelled reports whether simulator uuid ever announced itself.
func (w world) labelled(uuid string) bool {
	_, err := os.Stat(w.path(uuid, ".json"))
	return err == nil
}

// state returns the state a live simulator reports, and false if it is
// not alive.
func (w world) state(uuid string) (string, bool) {
	if !w.alive(uuid) {
		return "", false
	}
	data, err := os.ReadFile(w.path(uuid, ".state"))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(data)), true
}

// labels returns the labels of every live simulator of manager (all
// managers if empty), sorted by name.
func (w world) labels(manager string) ([]label, error) {
	files, err := filepath.Glob(filepath.Join(w.dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []label
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // removed while we looked
		}
		var l label
		if err := json.Unmarshal(data, &l); err != nil {
			return nil, fmt.Errorf("label %s: %w", f, err)
		}
		if (manager == "" || l.Manager == manager) && w.alive(l.UUID) {
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// killAll kills every simulator still alive in the world.
func (w world) killAll() {
	ls, _ := w.labels("")
	for _, l := range ls {
		_ = syscall.Kill(l.PID, syscall.SIGKILL)
	}
}
