package storage

import (
	"strconv"
	"strings"
	"time"
	"unsafe"
)

// decodeCanonical decodes data if it is a record exactly as
// MarshalBinary's json.Marshal writes it (after the format byte): fields
// in struct order, no whitespace, no escapes, no nulls. It reports false
// for anything else, and the caller decodes with encoding/json, which
// then also produces the error. So it changes how fast a record decodes,
// never what decodes or into what: every input it accepts, encoding/json
// decodes to the same record (FuzzCanonicalDecodeAgreesWithEncodingJSON).
//
// encoding/json took about 55 µs for a record with a full default trail,
// most of the time a restarted controller spends listing its executions.
func decodeCanonical(data []byte) (wireRecord, bool) {
	// A view of data, not a copy: every string the record keeps is copied
	// out of it by keep, so the record holds only what it needs and
	// nothing of data (which may be a page of bbolt's memory map).
	d := canonical{s: unsafe.String(unsafe.SliceData(data), len(data))}
	var w wireRecord
	ok := d.lit(`{"id":`) && d.str(&w.ID) &&
		d.lit(`,"status":`) && d.str(&w.Status) &&
		d.optStr(`,"previous":`, &w.Previous) &&
		d.lit(`,"revision":`) && d.uint(&w.Revision) &&
		d.optStr(`,"owner":`, &w.Owner) &&
		d.lit(`,"epoch":`) && d.uint(&w.Epoch) &&
		d.lit(`,"updated_at":`) && d.time(&w.UpdatedAt) &&
		d.lit(`,"since":`) && d.time(&w.Since) &&
		d.optStr(`,"reason":`, &w.Reason) &&
		d.history(&w.trail) &&
		d.historyLimit(&w.HistoryLimit) &&
		d.meta(&w.Meta) &&
		d.lit(`}`) && d.i == len(d.s)
	return w, ok
}

// canonical is a cursor over one encoded record.
type canonical struct {
	s string
	i int
	// kept are the strings copied so far, to copy each one once: a full
	// trail repeats the same few statuses, reasons, actors and owners
	// sixteen times, and copying the whole input instead made every
	// decoded record hold its encoding beside its entries (about 5 KB
	// where 2 do). A restarted controller holding 100k records paid for
	// the difference in page faults (docs/decisions/2026-12-05-scale.md).
	kept  [16]string
	nkept int
}

// keep returns a copy of s, the same copy for the same text.
func (d *canonical) keep(s string) string {
	for _, k := range d.kept[:d.nkept] {
		if k == s {
			return k
		}
	}
	c := strings.Clone(s)
	if d.nkept < len(d.kept) {
		d.kept[d.nkept] = c
		d.nkept++
	}
	return c
}

func (d *canonical) lit(want string) bool {
	if len(d.s)-d.i < len(want) || d.s[d.i:d.i+len(want)] != want {
		return false
	}
	d.i += len(want)
	return true
}

func (d *canonical) peek(want string) bool {
	return len(d.s)-d.i >= len(want) && d.s[d.i:d.i+len(want)] == want
}

// str reads a string with nothing to unescape: no backslash, no control
// character (which JSON does not allow unescaped). The caller checked
// that the whole input is UTF-8.
func (d *canonical) str(out *string) bool {
	text, ok := d.span()
	if ok {
		*out = d.keep(text)
	}
	return ok
}

// span reads a string as str does, returning a view of it: the caller
// copies what it keeps.
func (d *canonical) span() (string, bool) {
	if !d.lit(`"`) {
		return "", false
	}
	for j := d.i; j < len(d.s); j++ {
		switch c := d.s[j]; {
		case c == '"':
			text := d.s[d.i:j]
			d.i = j + 1
			return text, true
		case c == '\\' || c < 0x20:
			return "", false
		}
	}
	return "", false
}

// optStr reads key and a non-empty string if the input has key next:
// omitempty leaves an empty string out.
func (d *canonical) optStr(key string, out *string) bool {
	if !d.peek(key) {
		return true
	}
	d.i += len(key)
	return d.str(out) && *out != ""
}

// uint reads an unsigned integer as encoding/json writes one: digits,
// no leading zero, no sign, fraction or exponent.
func (d *canonical) uint(out *uint64) bool {
	j := d.i
	for j < len(d.s) && d.s[j] >= '0' && d.s[j] <= '9' {
		j++
	}
	if j == d.i || (d.s[d.i] == '0' && j-d.i > 1) {
		return false
	}
	v, err := strconv.ParseUint(d.s[d.i:j], 10, 64)
	if err != nil {
		return false
	}
	*out, d.i = v, j
	return true
}

// time reads a time the way encoding/json does: by handing the quoted
// text to time.Time's UnmarshalJSON.
func (d *canonical) time(out *time.Time) bool {
	start := d.i
	if _, ok := d.span(); !ok {
		return false
	}
	return out.UnmarshalJSON([]byte(d.s[start:d.i])) == nil
}

// history reads the audit trail, if there is one (omitempty leaves an
// empty one out), and reports false for one that is not a valid trail:
// encoding/json then decodes it and the record says what is wrong.
func (d *canonical) history(out *Trail) bool {
	if !d.peek(`,"history":[`) {
		return true
	}
	d.i += len(`,"history":[`)
	// Read into the stack: the trail keeps its entries packed.
	var room [DefaultHistoryLimit]Entry
	entries := room[:0]
	for {
		var e Entry
		ok := d.lit(`{"from":`) && d.str(&e.From) &&
			d.lit(`,"to":`) && d.str(&e.To) &&
			d.optStr(`,"reason":`, &e.Reason) &&
			d.optStr(`,"actor":`, &e.Actor) &&
			d.optStr(`,"owner":`, &e.Owner) &&
			d.lit(`,"epoch":`) && d.uint(&e.Epoch) &&
			d.lit(`,"at":`) && d.time(&e.At) &&
			d.lit(`,"revision":`) && d.uint(&e.Revision) &&
			d.lit(`}`)
		if !ok {
			return false
		}
		entries = append(entries, e)
		if d.lit(`]`) {
			trail, err := trailOf(entries)
			*out = trail
			return err == nil
		}
		if !d.lit(`,`) {
			return false
		}
	}
}

// historyLimit reads a positive history_limit, if there is one.
func (d *canonical) historyLimit(out *int) bool {
	if !d.peek(`,"history_limit":`) {
		return true
	}
	d.i += len(`,"history_limit":`)
	var v uint64
	if !d.uint(&v) || v == 0 || v > MaxHistory {
		return false // encoding/json decides what a zero, a huge or a negative one is
	}
	*out = int(v)
	return true
}

// meta reads a non-empty metadata map, keys in increasing order as
// encoding/json writes them (so a repeated key is not canonical).
func (d *canonical) meta(out *map[string]string) bool {
	if !d.peek(`,"meta":{`) {
		return true
	}
	d.i += len(`,"meta":{`)
	m := map[string]string{}
	prev := ""
	for {
		var k, v string
		if !d.str(&k) || (len(m) > 0 && k <= prev) || !d.lit(`:`) || !d.str(&v) {
			return false
		}
		m[k], prev = v, k
		if d.lit(`}`) {
			*out = m
			return true
		}
		if !d.lit(`,`) {
			return false
		}
	}
}
