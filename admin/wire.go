package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
)

// Stopped is what a stop did, as the API and the CLI report it.
type Stopped struct {
	ID   string `json:"id"`
	From string `json:"from"`
	To   string `json:"to"`
	// Changed is false when the execution was in the stopping status
	// already: nothing was written.
	Changed  bool      `json:"changed"`
	Revision uint64    `json:"revision"`
	Actor    string    `json:"actor"`
	Reason   string    `json:"reason"`
	At       time.Time `json:"at,omitzero"`
	// Warnings say why nobody may act on the stop soon: no controller
	// holds the execution now, or the stop was forced on an execution
	// the controller serving the handler would not act on.
	Warnings []string `json:"warnings,omitempty"`
}

func stoppedOf(c transition.Change[string]) Stopped {
	return Stopped{ID: c.ID, From: c.From, To: c.To, Changed: c.Changed(), Revision: c.Revision, Actor: c.Actor, Reason: c.Reason, At: c.At}
}

// unreadableWire is an [Unreadable] in JSON.
type unreadableWire struct {
	ID       string `json:"id"`
	Revision uint64 `json:"revision,omitempty"`
	Error    string `json:"error"`
}

// MarshalJSON writes the record's id, revision and why it cannot be read
// ("error").
func (u Unreadable) MarshalJSON() ([]byte, error) {
	w := unreadableWire{ID: u.ID, Revision: u.Revision, Error: fmt.Sprint(storage.ErrCorrupt)}
	if u.Err != nil {
		w.Error = u.Err.Error()
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads what MarshalJSON writes; Err then matches
// storage.ErrCorrupt and says what the handler said.
func (u *Unreadable) UnmarshalJSON(data []byte) error {
	var w unreadableWire
	if err := strictJSON(data, &w); err != nil {
		return err
	}
	if err := storage.ValidateID(w.ID); err != nil {
		return err
	}
	*u = Unreadable{ID: w.ID, Revision: w.Revision, Err: corrupt(w.Error)}
	return nil
}

// wireEvent is one line of a watch's stream.
type wireEvent struct {
	Type   EventType       `json:"type"`
	ID     string          `json:"id"`
	Record *storage.Record `json:"record,omitempty"`
	Error  string          `json:"error,omitempty"`
}

func eventWire(ev Event) wireEvent {
	w := wireEvent{Type: ev.Type, ID: ev.ID}
	switch ev.Type {
	case EventCurrent, EventChanged:
		rec := ev.Record
		w.Record = &rec
	case EventUnreadable:
		w.Error = fmt.Sprint(storage.ErrCorrupt)
		if ev.Err != nil {
			w.Error = ev.Err.Error()
		}
	}
	return w
}

// MarshalJSON writes the event as a watch streams it: {"type", "id",
// "record" (current, changed), "error" (unreadable)}.
func (ev Event) MarshalJSON() ([]byte, error) { return json.Marshal(eventWire(ev)) }

// UnmarshalJSON reads what MarshalJSON writes, and refuses anything else:
// an unknown type, a record missing where one is due or there where none
// is, a record that does not validate or is not the event's.
func (ev *Event) UnmarshalJSON(data []byte) error {
	var w wireEvent
	if err := strictJSON(data, &w); err != nil {
		return err
	}
	if err := storage.ValidateID(w.ID); err != nil {
		return err
	}
	out := Event{Type: w.Type, ID: w.ID}
	switch w.Type {
	case EventCurrent, EventChanged:
		if w.Record == nil {
			return fmt.Errorf("admin: a %s event without its record", w.Type)
		}
		if err := w.Record.Validate(); err != nil {
			return fmt.Errorf("admin: a %s event's record: %w", w.Type, err)
		}
		if w.Record.ID != w.ID {
			return fmt.Errorf("admin: a %s event of %q carries the record of %q", w.Type, w.ID, w.Record.ID)
		}
		out.Record = *w.Record
	case EventGone:
	case EventUnreadable:
		out.Err = corrupt(w.Error)
	default:
		return fmt.Errorf("admin: an event of unknown type %q", w.Type)
	}
	if w.Record != nil && out.Record.ID == "" {
		return fmt.Errorf("admin: a %s event with a record", w.Type)
	}
	*ev = out
	return nil
}

// strictJSON decodes one JSON value into v, refusing unknown fields and
// anything after it.
func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	if dec.More() {
		return fmt.Errorf("admin: data after the JSON value")
	}
	return nil
}

// decodePage reads a page a handler sent, checking every record.
func decodePage(data []byte) (Page, error) {
	var p Page
	if err := strictJSON(data, &p); err != nil {
		return Page{}, err
	}
	for _, list := range [][]storage.Record{p.Items, p.Foreign} {
		for i := range list {
			if err := list[i].Validate(); err != nil {
				return Page{}, fmt.Errorf("admin: a listed record: %w", err)
			}
		}
	}
	if p.Next != "" {
		if err := storage.ValidateID(p.Next); err != nil {
			return Page{}, fmt.Errorf("admin: the next page: %w", err)
		}
	}
	if p.Items == nil {
		p.Items = []storage.Record{}
	}
	return p, nil
}
