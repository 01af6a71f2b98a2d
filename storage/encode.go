package storage

import (
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// appendCanonical appends w, with w.trail for its history, as
// encoding/json's Marshal writes it (with w.History for it), byte for
// byte, when every string in it needs no escaping; it reports false
// otherwise (and for a time Marshal would refuse), and the caller uses
// encoding/json. TestCanonicalEncodeIsEncodingJSON holds it to Marshal's
// output. Marshal took about 15 µs for a record with a full default
// trail, inside bbolt's write transaction where the writes of a group
// commit wait on each other.
func appendCanonical(b []byte, w *wireRecord) ([]byte, bool) {
	ok := true
	str := func(key, v string, omitEmpty bool) {
		if !ok || (omitEmpty && v == "") {
			return
		}
		if !plain(v) {
			ok = false
			return
		}
		b = append(b, key...)
		b = append(b, '"')
		b = append(b, v...)
		b = append(b, '"')
	}
	tm := func(key string, t time.Time) {
		if !ok {
			return
		}
		b = append(append(b, key...), '"')
		start := len(b)
		b = t.AppendFormat(b, time.RFC3339Nano)
		// What Time.MarshalJSON refuses (a year beyond four digits, an
		// offset of 24 hours or more or with seconds) encoding/json
		// refuses too: leave those to it, to refuse.
		if len(b)-start < len("2006-01-02T15:04:05Z") || b[start+4] != '-' ||
			b[len(b)-1] != 'Z' && (b[len(b)-6] >= '0' && b[len(b)-6] <= '9' || (b[len(b)-5]-'0')*10+(b[len(b)-4]-'0') >= 24) {
			ok = false
			return
		}
		b = append(b, '"')
	}
	str(`{"id":`, w.ID, false)
	str(`,"status":`, w.Status, false)
	str(`,"previous":`, w.Previous, true)
	b = strconv.AppendUint(append(b, `,"revision":`...), w.Revision, 10)
	str(`,"owner":`, w.Owner, true)
	b = strconv.AppendUint(append(b, `,"epoch":`...), w.Epoch, 10)
	tm(`,"updated_at":`, w.UpdatedAt)
	tm(`,"since":`, w.Since)
	str(`,"reason":`, w.Reason, true)
	// A trail's texts are each checked once, not once an entry: a full
	// trail repeats the same few sixteen times.
	texts := w.trail.texts
	for _, v := range texts {
		if !plain(v) {
			return b, false
		}
	}
	text := func(key string, i uint16, omitEmpty bool) {
		if v := texts[i]; !omitEmpty || v != "" {
			b = append(append(append(append(b, key...), '"'), v...), '"')
		}
	}
	for k := range w.trail.entries {
		e := &w.trail.entries[k]
		if k == 0 {
			b = append(b, `,"history":[`...)
		} else {
			b = append(b, ',')
		}
		text(`{"from":`, e.from, false)
		text(`,"to":`, e.to, false)
		text(`,"reason":`, e.reason, true)
		text(`,"actor":`, e.actor, true)
		text(`,"owner":`, e.owner, true)
		b = strconv.AppendUint(append(b, `,"epoch":`...), e.epoch, 10)
		tm(`,"at":`, w.trail.at(k))
		b = strconv.AppendUint(append(b, `,"revision":`...), e.revision, 10)
		b = append(b, '}')
	}
	if w.trail.Len() > 0 {
		b = append(b, ']')
	}
	if w.HistoryLimit != 0 {
		b = strconv.AppendInt(append(b, `,"history_limit":`...), int64(w.HistoryLimit), 10)
	}
	if len(w.Meta) > 0 {
		keys := make([]string, 0, len(w.Meta))
		for k := range w.Meta {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for n, k := range keys {
			if n == 0 {
				str(`,"meta":{`, k, false)
			} else {
				str(`,`, k, false)
			}
			str(`:`, w.Meta[k], false)
		}
		b = append(b, '}')
	}
	return append(b, '}'), ok
}

// plain reports whether encoding/json writes s as it is between quotes:
// valid UTF-8 with no quote, backslash, control character, no <, > or &
// (which Marshal escapes for HTML) and no U+2028 or U+2029 (which it
// escapes for JavaScript).
func plain(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			return false
		}
		i += size
	}
	return true
}
