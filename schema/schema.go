// Package schema records, beside an execution store's records, the table
// and the roles they follow, so that what the library knows about a
// lifecycle stops living only in the process that built it: the operator's
// CLI, a metrics exporter and the next version of a controller read the
// table from the store, and a table can change under live records without
// stranding them.
//
// A [Document] is the recorded table: its name, its version, the states
// of every earlier version, and the table and roles as data
// (transition.Description, recovery.RolesDescription). [Save] records
// the table a controller opens with, checking it against the one recorded:
// the same table writes nothing, one that only adds statuses and edges is
// the next version (the seed's own case: adding relocating), anything that
// could strand a record is refused, naming each difference. [Load] reads
// it back, and [Document.Rebuild] makes a working table (without guards)
// and roles of it.
//
// The document is stored by a store that implements storage.TableKeeper;
// its encoding is JSON, versioned by its "format" field, and documented
// in docs/tables.md.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/transition"
)

// Format is the version of the document's encoding this build writes.
// It reads it and format 1 (whose roles had one relocating and one
// stopping state, as plain names); a document in another format is
// refused, never guessed at.
const Format = 2

// Document is a recorded table.
type Document struct {
	// Format is the encoding's version: Format.
	Format int `json:"format"`
	// Name names the lifecycle ("teraslice", "render-jobs"): a store
	// keeps one, and a controller opening it with another is refused.
	Name string `json:"name"`
	// Version counts the recorded tables, from 1.
	Version int `json:"version"`
	// Earlier are the states of every earlier version, oldest first: what
	// tells a status of another version from one of no version at all.
	Earlier []Version                 `json:"earlier,omitempty"`
	Table   transition.Description    `json:"table"`
	Roles   recovery.RolesDescription `json:"roles"`
}

// Version is what the document keeps of an earlier version of its table.
type Version struct {
	Version int      `json:"version"`
	States  []string `json:"states"`
}

// MaxNameLen bounds a lifecycle's name.
const MaxNameLen = 128

// ErrInvalidDocument is matched by the errors of [Decode] and
// [Document.Rebuild] for a document no table can be rebuilt from, and by
// [Describe]'s for a name no document can carry.
var ErrInvalidDocument = errors.New("invalid table document")

// Describe returns the document of roles and their table, named name, at
// version 0 (Save gives it its version).
func Describe[S comparable](name string, roles *recovery.Roles[S]) (Document, error) {
	if roles == nil {
		return Document{}, fmt.Errorf("schema: %w: nil roles", ErrInvalidDocument)
	}
	if err := checkName(name); err != nil {
		return Document{}, err
	}
	return Document{Format: Format, Name: name, Table: roles.Table().Describe(), Roles: roles.Describe()}, nil
}

func checkName(name string) error {
	if name == "" || len(name) > MaxNameLen || strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return fmt.Errorf("schema: %w: name %q: want 1 to %d printable bytes", ErrInvalidDocument, name, MaxNameLen)
	}
	return nil
}

// Encode returns the document's JSON, indented for people reading it
// where the store keeps it.
func (d Document) Encode() ([]byte, error) {
	if _, _, err := d.Rebuild(); err != nil {
		return nil, err
	}
	return json.MarshalIndent(d, "", "  ")
}

// Decode reads a document Encode wrote (or one in format 1, upgraded) and
// checks it as Rebuild does. Anything else (another format, unknown
// fields, trailing data, a table or roles that do not build) returns an
// error matching ErrInvalidDocument.
func Decode(data []byte) (Document, error) {
	var probe struct {
		Format int `json:"format"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return Document{}, fmt.Errorf("schema: %w: %v", ErrInvalidDocument, err)
	}
	var d Document
	switch probe.Format {
	case Format:
		if err := strict(data, &d); err != nil {
			return Document{}, err
		}
	case 1:
		var v1 documentV1
		if err := strict(data, &v1); err != nil {
			return Document{}, err
		}
		d = v1.upgraded()
	default:
		return Document{}, fmt.Errorf("schema: %w: format %d (this build reads 1 and %d)", ErrInvalidDocument, probe.Format, Format)
	}
	if _, _, err := d.Rebuild(); err != nil {
		return Document{}, err
	}
	return d, nil
}

// strict decodes data into v: one JSON value, no unknown field, nothing
// after it.
func strict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("schema: %w: %v", ErrInvalidDocument, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("schema: %w: trailing data after the document", ErrInvalidDocument)
	}
	return nil
}

// documentV1 is a document in format 1: its roles had at most one
// relocating and one stopping state, named by plain strings.
type documentV1 struct {
	Format  int                    `json:"format"`
	Name    string                 `json:"name"`
	Version int                    `json:"version"`
	Earlier []Version              `json:"earlier,omitempty"`
	Table   transition.Description `json:"table"`
	Roles   struct {
		NotStarted []string     `json:"not_started,omitempty"`
		Running    []string     `json:"running"`
		Relocating string       `json:"relocating,omitempty"`
		Restart    string       `json:"restart,omitempty"`
		Stopping   string       `json:"stopping,omitempty"`
		Stopped    string       `json:"stopped,omitempty"`
		Failed     string       `json:"failed"`
		Completed  string       `json:"completed,omitempty"`
		Terminated string       `json:"terminated,omitempty"`
		Deadlines  []deadlineV1 `json:"deadlines,omitempty"`
	} `json:"roles"`
}

// deadlineV1 is a deadline as format 1 recorded it: a timer from entry.
type deadlineV1 struct {
	State string `json:"state"`
	After string `json:"after"`
	Then  string `json:"then"`
}

// upgraded is the same document in this build's format.
func (v documentV1) upgraded() Document {
	r := v.Roles
	d := Document{Format: Format, Name: v.Name, Version: v.Version, Earlier: v.Earlier, Table: v.Table, Roles: recovery.RolesDescription{
		NotStarted: r.NotStarted, Running: r.Running, Failed: r.Failed, Completed: r.Completed, Terminated: r.Terminated,
	}}
	for _, dl := range r.Deadlines {
		d.Roles.Timers = append(d.Roles.Timers, recovery.TimerDescription{State: dl.State, After: dl.After, Then: dl.Then})
	}
	if r.Relocating != "" || r.Restart != "" {
		d.Roles.Relocating = []recovery.EndDescription{{State: r.Relocating, Then: r.Restart}}
	}
	if r.Stopping != "" || r.Stopped != "" {
		d.Roles.Stopping = []recovery.EndDescription{{State: r.Stopping, Then: r.Stopped}}
	}
	return d
}

// Rebuild returns the table the document describes, with the states'
// names as states and no guards, and its roles.
func (d Document) Rebuild() (*transition.Table[string], *recovery.Roles[string], error) {
	if err := checkName(d.Name); err != nil {
		return nil, nil, err
	}
	if d.Version < 0 {
		return nil, nil, fmt.Errorf("schema: %w: version %d", ErrInvalidDocument, d.Version)
	}
	for k, v := range d.Earlier {
		if v.Version < 1 || v.Version >= d.Version || (k > 0 && v.Version <= d.Earlier[k-1].Version) {
			return nil, nil, fmt.Errorf("schema: %w: earlier version %d out of order (the table is version %d)", ErrInvalidDocument, v.Version, d.Version)
		}
	}
	table, err := transition.Rebuild(d.Table)
	if err != nil {
		return nil, nil, fmt.Errorf("schema: %w: %w", ErrInvalidDocument, err)
	}
	roles, err := recovery.RebuildRoles(table, d.Roles)
	if err != nil {
		return nil, nil, fmt.Errorf("schema: %w: %w", ErrInvalidDocument, err)
	}
	return table, roles, nil
}

// Knows reports whether status is a state of the table or of an earlier
// version of it, and which version knows it last (the table's own
// version for one of its states).
func (d Document) Knows(status string) (int, bool) {
	if slices.Contains(d.Table.States, status) {
		return d.Version, true
	}
	for k := len(d.Earlier) - 1; k >= 0; k-- {
		if slices.Contains(d.Earlier[k].States, status) {
			return d.Earlier[k].Version, true
		}
	}
	return 0, false
}

// VersionOf returns the version of d's table that t (a controller's
// table, as Describe gives it) is: the newest recorded version with t's
// states (d's own first), which is how an older
// controller of a rolling upgrade or a rollback finds the version it
// serves. False when no recorded version has t's states (a table newer
// than d, or another one).
func (d Document) VersionOf(t Document) (int, bool) {
	if t.Name != d.Name {
		return 0, false
	}
	if sameSet(d.Table.States, t.Table.States) {
		return d.Version, true
	}
	for k := len(d.Earlier) - 1; k >= 0; k-- {
		if sameSet(d.Earlier[k].States, t.Table.States) {
			return d.Earlier[k].Version, true
		}
	}
	return 0, false
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	return true
}
