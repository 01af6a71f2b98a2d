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
	var day utcDay
	// utc appends a UTC time given as Unix seconds and nanoseconds, or
	// nothing, reporting false, for a year appendUTC does not write.
	utc := func(key string, sec int64, nsec int32) bool {
		mark := len(b)
		b = append(append(b, key...), '"')
		var fast bool
		if b, fast = appendUTC(b, sec, nsec, &day); !fast {
			b = b[:mark]
			return false
		}
		b = append(b, '"')
		return true
	}
	tm := func(key string, t time.Time) {
		if !ok || t.Location() == time.UTC && utc(key, t.Unix(), int32(t.Nanosecond())) {
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
		if zones := w.trail.zones; zones != nil && zones[k] != nil || !utc(`,"at":`, e.sec, e.nsec) {
			tm(`,"at":`, w.trail.at(k))
		}
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

// appendUTC appends the UTC time sec.nsec (Unix seconds and nanoseconds,
// 0 ≤ nsec < 1e9) as Time.AppendFormat with time.RFC3339Nano writes it,
// "2006-01-02T15:04:05.999999999Z", and reports true; for a year outside
// 0-9999, which that format does not write in four digits, it appends
// nothing and reports false. Formatting through time.Time was a sixth
// of encoding a record with a full trail, whose eighteen times are
// mostly of a few days: day holds the last date written, so most times
// are a clock time on a known day.
func appendUTC(b []byte, sec int64, nsec int32, day *utcDay) ([]byte, bool) {
	const firstSec, lastSec = -62167219200, 253402300799 // 0000-01-01T00:00:00Z, 9999-12-31T23:59:59Z
	if sec < firstSec || sec > lastSec {
		return b, false
	}
	days := sec / 86400
	clock := sec % 86400
	if clock < 0 {
		days, clock = days-1, clock+86400
	}
	if !day.set || day.days != days {
		year, month, date := time.Unix(days*86400, 0).UTC().Date()
		day.set, day.days = true, days
		day.text = [10]byte{
			byte('0' + year/1000), byte('0' + year/100%10), byte('0' + year/10%10), byte('0' + year%10), '-',
			byte('0' + month/10), byte('0' + month%10), '-',
			byte('0' + date/10), byte('0' + date%10),
		}
	}
	hour, minute, second := clock/3600, clock/60%60, clock%60
	b = append(b, day.text[:]...)
	b = append(b, 'T',
		byte('0'+hour/10), byte('0'+hour%10), ':',
		byte('0'+minute/10), byte('0'+minute%10), ':',
		byte('0'+second/10), byte('0'+second%10))
	if nsec != 0 {
		var frac [10]byte
		frac[0] = '.'
		for i, n := 9, nsec; i > 0; i, n = i-1, n/10 {
			frac[i] = byte('0' + n%10)
		}
		end := 10
		for frac[end-1] == '0' {
			end--
		}
		b = append(b, frac[:end]...)
	}
	return append(b, 'Z'), true
}

// utcDay is the day appendUTC wrote last: its days since the epoch and
// its "2006-01-02" text.
type utcDay struct {
	set  bool
	days int64
	text [10]byte
}
