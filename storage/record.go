package storage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/execfsm/execfsm/storage/storekit/quote"
)

// Limits every [Record] obeys. Stores check them on every write, so a
// megabyte of reason is a clear error at the caller, not a rejected etcd
// request or a bloated audit trail later.
const (
	MaxIDLen        = 256
	MaxStatusLen    = 128  // the text form of a state (status, previous, history)
	MaxOwnerLen     = 256  // owner and actor names
	MaxReasonLen    = 8192 // room for a stack trace, as Teraslice's _failureReason holds
	MaxMetaEntries  = 64
	MaxMetaKeyLen   = 128
	MaxMetaValueLen = 4096
	MaxHistory      = 256

	// DefaultHistoryLimit is how many audit entries a record keeps when
	// its HistoryLimit is 0.
	DefaultHistoryLimit = 16
)

// Record is an execution as a [Store] keeps it. It is status-agnostic:
// the status is stored as its text form, so one store serves any table.
type Record struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	// Previous is the status the current one was entered from, empty if
	// the record was created in it. It is the memory return edges need: a
	// relocating record remembers the status it left.
	Previous string `json:"previous,omitempty"`
	// Revision is assigned by the store on every write and is what
	// CompareAndSwap compares. Revisions of one record strictly increase.
	Revision uint64 `json:"revision"`
	// Owner and Epoch are the ownership claim: a controller that takes
	// over bumps Epoch, and writes made under an older claim fail with
	// ErrFenced.
	Owner     string    `json:"owner,omitempty"`
	Epoch     uint64    `json:"epoch"`
	UpdatedAt time.Time `json:"updated_at"`
	// Since is when the record entered its current status; UpdatedAt
	// also moves on writes that keep the status (a take-over, metadata).
	// Deadlines ("relocating for more than fifteen minutes") count from it.
	Since  time.Time `json:"since"`
	Reason string    `json:"reason,omitempty"` // of the last change
	// History is the audit trail of the most recent changes, oldest
	// first, written in the same atomic write as the change itself, each
	// entry at a higher revision than the one before.
	History Trail `json:"history"`
	// HistoryLimit is how many entries History keeps: every writer (a
	// Persisted, a store's Acquire) drops entries beyond it, progress
	// first, then take-overs in place, then the oldest moves (see
	// [Trail.Append]), so progress never pushes out a move or a take-over
	// (the one that recorded a crash restart). 0 means
	// DefaultHistoryLimit; at most MaxHistory. It is the record's, set
	// when the record is created (see the History option), so every
	// writer keeps the trail its creator asked for.
	HistoryLimit int `json:"history_limit,omitempty"`
	// Meta is a small string map for the user and for this module's
	// packages (restart counts, failure reasons).
	Meta map[string]string `json:"meta,omitempty"`
}

// Entry is one change in a record's audit trail.
type Entry struct {
	From   string    `json:"from"`
	To     string    `json:"to"`
	Reason string    `json:"reason,omitempty"`
	Actor  string    `json:"actor,omitempty"`
	Owner  string    `json:"owner,omitempty"`
	Epoch  uint64    `json:"epoch"`
	At     time.Time `json:"at"`
	// Revision is the revision the change was applied at: the record's
	// revision just before it.
	Revision uint64 `json:"revision"`
}

// Written returns the revision each entry of the audit trail wrote, in
// the trail's order. An entry holds the revision its change was applied
// at (the record's just before it), so the revision it wrote is the one
// the next entry was applied at, and the record's own for the last:
// every write through this module (a move, progress, a take-over, a
// migration) adds exactly one entry. It is what an operator reads as a
// change's revision, the one a stop reports.
func (r Record) Written() []uint64 {
	n := r.History.Len()
	if n == 0 {
		return nil
	}
	out := make([]uint64, n)
	for k, e := range r.History.All() {
		if k > 0 {
			out[k-1] = e.Revision
		}
	}
	out[n-1] = r.Revision
	return out
}

// HistoryKept returns how many audit entries writers keep: HistoryLimit,
// or DefaultHistoryLimit when it is 0.
func (r Record) HistoryKept() int {
	if r.HistoryLimit == 0 {
		return DefaultHistoryLimit
	}
	return r.HistoryLimit
}

// Clone returns a copy of r that shares nothing mutable with it: its
// Meta is copied, its History (immutable) shared.
func (r Record) Clone() Record {
	if r.Meta != nil {
		r.Meta = maps.Clone(r.Meta)
	}
	return r
}

// Validate checks r against the limits and rules every store enforces:
// a non-empty id, a status, bounded lengths, valid UTF-8 everywhere (JSON
// would silently replace invalid bytes, and a record must come back as it
// went in). The error matches [ErrInvalidRecord].
func (r *Record) Validate() error {
	if err := r.validate(); err != nil {
		return fmt.Errorf("storage: record %s: %w: %v", quote.Limited(r.ID), ErrInvalidRecord, err)
	}
	return nil
}

// validate returns what is wrong with r, in words that name neither the
// record nor a sentinel: its callers add those. It runs on every write
// (twice when a store validates before encoding), so it checks field by
// field without building anything: the audit trail is most of a record.
func (r *Record) validate() error {
	if r.ID == "" || r.Status == "" || !validID(r.ID) || !validText(r.Status, MaxStatusLen) ||
		!validText(r.Previous, MaxStatusLen) || !validText(r.Owner, MaxOwnerLen) || !validText(r.Reason, MaxReasonLen) {
		// The slow path, only for a record that is wrong: say which field.
		for _, f := range [...]struct {
			name, value string
			max         int
			empty       bool
		}{
			{"id", r.ID, MaxIDLen, false}, {"status", r.Status, MaxStatusLen, false},
			{"previous", r.Previous, MaxStatusLen, true}, {"owner", r.Owner, MaxOwnerLen, true},
			{"reason", r.Reason, MaxReasonLen, true},
		} {
			if err := checkText(f.name, f.value, f.max, f.empty); err != nil {
				return err
			}
		}
		return checkID(r.ID)
	}
	if r.HistoryLimit < 0 || r.HistoryLimit > MaxHistory {
		return fmt.Errorf("history limit %d, want 0 (the default) to %d", r.HistoryLimit, MaxHistory)
	}
	// A Trail was checked entry by entry when it was made.
	if r.History.Len() > r.HistoryKept() {
		return fmt.Errorf("history has %d entries, at most %d", r.History.Len(), r.HistoryKept())
	}
	if len(r.Meta) > MaxMetaEntries {
		return fmt.Errorf("meta has %d entries, at most %d", len(r.Meta), MaxMetaEntries)
	}
	for k, v := range r.Meta {
		if k == "" || !validText(k, MaxMetaKeyLen) {
			return checkText("meta key", k, MaxMetaKeyLen, false)
		}
		if !validText(v, MaxMetaValueLen) {
			return checkText("meta["+quote.Limited(k)+"]", v, MaxMetaValueLen, true)
		}
	}
	return nil
}

// check returns what is wrong with one audit entry.
func (e *Entry) check() error {
	if !validText(e.From, MaxStatusLen) || !validText(e.To, MaxStatusLen) || !validText(e.Reason, MaxReasonLen) ||
		!validText(e.Actor, MaxOwnerLen) || !validText(e.Owner, MaxOwnerLen) {
		// The slow path, only for an entry that is wrong: say which field.
		for _, f := range [...]struct {
			name, value string
			max         int
		}{
			{"from", e.From, MaxStatusLen}, {"to", e.To, MaxStatusLen}, {"reason", e.Reason, MaxReasonLen},
			{"actor", e.Actor, MaxOwnerLen}, {"owner", e.Owner, MaxOwnerLen},
		} {
			if err := checkText(f.name, f.value, f.max, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// validText reports whether value is at most maxLen bytes of UTF-8.
func validText(value string, maxLen int) bool {
	if len(value) > maxLen {
		return false
	}
	if len(value) >= 32 {
		return utf8.ValidString(value) // word at a time
	}
	// Most fields are a few bytes of ASCII (a status, a name), for which
	// the call costs more than the check.
	for i := 0; i < len(value); i++ {
		if value[i] >= utf8.RuneSelf {
			return utf8.ValidString(value[i:])
		}
	}
	return true
}

// ValidateID checks that id is one a record can have: 1 to MaxIDLen bytes
// of UTF-8 without control characters (an id is named in URLs, log lines
// and terminals, where a newline or an escape sequence would forge what
// follows). Stores call it before any lookup, so a hostile id is a clear
// error, never a request. The error matches [ErrInvalidRecord].
func ValidateID(id string) error {
	err := checkText("id", id, MaxIDLen, false)
	if err == nil {
		err = checkID(id)
	}
	if err != nil {
		return fmt.Errorf("storage: id %s: %w: %v", quote.Limited(id), ErrInvalidRecord, err)
	}
	return nil
}

// validID reports whether id is 1 to MaxIDLen bytes of UTF-8 without
// control characters. It runs on every record decoded, so ASCII, the
// common case, is checked a byte at a time without decoding runes.
func validID(id string) bool {
	if id == "" || len(id) > MaxIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case c >= utf8.RuneSelf:
			return checkID(id[i:]) == nil
		case c < ' ' || c == 0x7f:
			return false
		}
	}
	return true
}

// checkID says what control character, or invalid UTF-8, id holds; its
// length is checkText's to check.
func checkID(id string) error {
	for i, r := range id {
		switch {
		case r == utf8.RuneError && !utf8.ValidString(id[i:]):
			return errors.New("id is not valid UTF-8")
		case unicode.IsControl(r):
			return fmt.Errorf("id has a control character (%U) at byte %d", r, i)
		}
	}
	return nil
}

func checkText(name, value string, maxLen int, emptyOK bool) error {
	switch {
	case value == "" && !emptyOK:
		return fmt.Errorf("%s is empty", name)
	case len(value) > maxLen:
		return fmt.Errorf("%s is %d bytes, at most %d", name, len(value), maxLen)
	case !utf8.ValidString(value):
		return fmt.Errorf("%s is not valid UTF-8", name)
	}
	return nil
}

// recordFormatJSON is the first byte of an encoded record: format 1 is
// JSON. A reader that meets a format it does not know refuses the record
// instead of guessing, and a writer that adds a field bumps the format.
const recordFormatJSON = 1

// decodeJSON decodes a record with encoding/json: whatever it accepts as
// a record, nothing more (no unknown field, nothing after the record).
func decodeJSON(data []byte) (wireRecord, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w wireRecord
	if err := dec.Decode(&w); err != nil {
		return wireRecord{}, fmt.Errorf("storage: %w: %v", ErrCorrupt, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return wireRecord{}, fmt.Errorf("storage: %w: trailing data after the record", ErrCorrupt)
	}
	return w, nil
}

// wireRecord is a Record as MarshalBinary stores it: the same JSON, with
// the trail as a plain array so that encoding and decoding it costs no
// second pass.
type wireRecord struct {
	ID           string            `json:"id"`
	Status       string            `json:"status"`
	Previous     string            `json:"previous,omitempty"`
	Revision     uint64            `json:"revision"`
	Owner        string            `json:"owner,omitempty"`
	Epoch        uint64            `json:"epoch"`
	UpdatedAt    time.Time         `json:"updated_at"`
	Since        time.Time         `json:"since"`
	Reason       string            `json:"reason,omitempty"`
	History      []Entry           `json:"history,omitempty"`
	HistoryLimit int               `json:"history_limit,omitempty"`
	Meta         map[string]string `json:"meta,omitempty"`
	// trail is the history as the fast paths read and write it: the
	// canonical encoder writes it and the canonical decoder makes it
	// (History is then nil); encoding/json uses History.
	trail Trail
}

// record is the record w holds, and what is wrong with it as a stored
// record: its trail (the one the canonical decoder made, or its entries
// as encoding/json decoded them) and its limits.
func (w *wireRecord) record() (Record, error) {
	v := Record{ID: w.ID, Status: w.Status, Previous: w.Previous, Revision: w.Revision, Owner: w.Owner,
		Epoch: w.Epoch, UpdatedAt: w.UpdatedAt, Since: w.Since, Reason: w.Reason, History: w.trail,
		HistoryLimit: w.HistoryLimit, Meta: w.Meta}
	var err error
	if w.History != nil {
		v.History, err = trailOf(w.History)
	}
	if err == nil {
		err = v.validate()
	}
	return v, err
}

// MarshalBinary encodes r for a store: one format byte, then JSON. It
// validates r first, so nothing a store writes is unreadable.
func (r Record) MarshalBinary() ([]byte, error) {
	data, err := r.appendJSON(nil, true)
	if err != nil {
		return nil, err
	}
	return data, nil
}

// AppendBinary appends r's encoding, as [Record.MarshalBinary] returns
// it, to b and returns the extended slice; it implements
// [encoding.BinaryAppender]. A store that encodes every write into a
// buffer it reuses saves allocating, touching and collecting a buffer
// of the record's size a write. On an error b is returned as it was.
func (r Record) AppendBinary(b []byte) ([]byte, error) {
	return r.appendJSON(b, true)
}

// EncodeJSON encodes r as a JSON document, for a store that keeps records
// as text a person reads (the kube store's ConfigMaps): what MarshalBinary
// writes after its format byte. It validates r first, as MarshalBinary
// does. DecodeJSON reads it back.
func (r Record) EncodeJSON() ([]byte, error) {
	data, err := r.appendJSON(nil, false)
	if err != nil {
		return nil, err
	}
	return data, nil
}

// appendJSON validates r and appends its JSON document to b, after the
// format byte if format is set; on an error it returns b as it was.
func (r Record) appendJSON(b []byte, format bool) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return b, err
	}
	n := len(b)
	b = slices.Grow(b, 1+r.encodedSizeHint())
	if format {
		b = append(b, recordFormatJSON)
	}
	w := r.wire()
	if data, ok := appendCanonical(b, &w); ok {
		return data, nil
	}
	w.History = w.trail.Entries()
	body, err := json.Marshal(w)
	if err != nil {
		return b[:n], fmt.Errorf("storage: record %s: %w", quote.Limited(r.ID), err)
	}
	return append(b, body...), nil
}

// encodedSizeHint is at least the size of r's canonical JSON when its
// numbers and times are short, as they are (an append grows the buffer
// for the rest): what a write allocates for its encoding, once a write
// (the bound it replaced, 320 bytes an entry, made a 3 KB record cost a
// 6 KB buffer).
func (r *Record) encodedSizeHint() int {
	const recordKeys, entryKeys, metaKeys = 256, 160, 6 // keys, quotes, numbers and times
	n := recordKeys + len(r.ID) + len(r.Status) + len(r.Previous) + len(r.Owner) + len(r.Reason)
	t := &r.History
	for k := range t.entries {
		n += entryKeys
		for _, i := range t.entries[k].fields() {
			n += len(t.texts[i])
		}
	}
	for k, v := range r.Meta {
		n += metaKeys + len(k) + len(v)
	}
	return n
}

// wire is r as MarshalBinary encodes it.
func (r *Record) wire() wireRecord {
	return wireRecord{ID: r.ID, Status: r.Status, Previous: r.Previous, Revision: r.Revision,
		Owner: r.Owner, Epoch: r.Epoch, UpdatedAt: r.UpdatedAt, Since: r.Since, Reason: r.Reason,
		trail: r.History, HistoryLimit: r.HistoryLimit, Meta: r.Meta}
}

// UnmarshalBinary decodes what MarshalBinary wrote. Anything else (empty
// input, an unknown format byte, malformed JSON, unknown fields, trailing
// bytes, a record breaking the limits, an audit trail out of order)
// returns an error matching [ErrCorrupt], and r is left unchanged.
func (r *Record) UnmarshalBinary(data []byte) error {
	if len(data) == 0 {
		return fmt.Errorf("storage: %w: empty", ErrCorrupt)
	}
	if data[0] != recordFormatJSON {
		return fmt.Errorf("storage: %w: unknown record format 0x%02x (this build reads 0x%02x)", ErrCorrupt, data[0], recordFormatJSON)
	}
	return r.DecodeJSON(data[1:])
}

// DecodeJSON decodes what EncodeJSON wrote, also indented (json.Indent),
// as strictly as UnmarshalBinary: anything else returns an error matching
// [ErrCorrupt], and r is left unchanged.
func (r *Record) DecodeJSON(data []byte) error {
	if !utf8.Valid(data) {
		// JSON would quietly turn the bad bytes into U+FFFD.
		return fmt.Errorf("storage: %w: not valid UTF-8", ErrCorrupt)
	}
	w, ok := decodeCanonical(data)
	if !ok {
		var err error
		if w, err = decodeJSON(data); err != nil {
			return err
		}
	}
	v, err := w.record()
	if err != nil {
		// validate's own words, not Validate's: "storage: corrupt record:
		// storage: record …: invalid record: …" says it twice.
		return fmt.Errorf("storage: record %s: %w: %v", quote.Limited(v.ID), ErrCorrupt, err)
	}
	*r = v
	return nil
}
