package admin

import (
	"errors"
	"testing"

	"github.com/execfsm/execfsm/storage"
)

// A Client decodes whatever answers it: a page and a watch's lines must
// be refused or read whole, never panic, and what is read must be valid.

func FuzzDecodePage(f *testing.F) {
	f.Add([]byte(`{"items":[],"counts":{}}`))
	f.Add([]byte(`{"items":[{"id":"a","status":"s","revision":1,"epoch":0,"updated_at":"2026-12-03T12:00:00Z","since":"2026-12-03T12:00:00Z","history":[]}],"next":"a","counts":{"s":1},"unreadable":[{"id":"b","error":"storage: corrupt record"}],"unreadable_count":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := decodePage(data)
		if err != nil {
			return
		}
		for _, list := range [][]storage.Record{p.Items, p.Foreign} {
			for i := range list {
				if err := list[i].Validate(); err != nil {
					t.Fatalf("an invalid record was read: %v", err)
				}
			}
		}
		for _, u := range p.Unreadable {
			if storage.ValidateID(u.ID) != nil || !errors.Is(u.Err, storage.ErrCorrupt) {
				t.Fatalf("an unreadable entry read wrong: %+v", u)
			}
		}
	})
}

func FuzzDecodeLine(f *testing.F) {
	f.Add([]byte(`{"type":"gone","id":"a"}`))
	f.Add([]byte(`{"type":"unreadable","id":"a","error":"storage: corrupt record"}`))
	f.Add([]byte(`{"type":"changed","id":"a","record":{"id":"a","status":"s","revision":1,"epoch":0,"updated_at":"2026-12-03T12:00:00Z","since":"2026-12-03T12:00:00Z","history":[]}}`))
	f.Add([]byte(`{"error":{"code":"unavailable","message":"admin: watch: unavailable: the handler is closed"}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		ev, err := decodeLine(line)
		if err != nil {
			return
		}
		if storage.ValidateID(ev.ID) != nil {
			t.Fatalf("an event of an invalid id: %q", ev.ID)
		}
		switch ev.Type {
		case EventCurrent, EventChanged:
			if ev.Record.ID != ev.ID || ev.Record.Validate() != nil {
				t.Fatalf("an event with a wrong record: %+v", ev)
			}
		case EventGone:
		case EventUnreadable:
			if !errors.Is(ev.Err, storage.ErrCorrupt) {
				t.Fatalf("an unreadable event whose error is not corrupt: %v", ev.Err)
			}
		default:
			t.Fatalf("an event of type %q", ev.Type)
		}
		// What is read writes back to the same event.
		data, err := ev.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeLine(data)
		if err != nil || again.Type != ev.Type || again.ID != ev.ID {
			t.Fatalf("%q read back as %+v, %v", data, again, err)
		}
	})
}
