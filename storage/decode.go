package storage

import (
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
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
	// lastDate is the day of the trail's time read last.
	lastDate lastDate
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
	if j-d.i < 20 { // 19 digits cannot overflow 64 bits
		var v uint64
		for _, c := range []byte(d.s[d.i:j]) {
			v = v*10 + uint64(c-'0')
		}
		*out, d.i = v, j
		return true
	}
	v, err := strconv.ParseUint(d.s[d.i:j], 10, 64)
	if err != nil {
		return false
	}
	*out, d.i = v, j
	return true
}

// time reads a time the way encoding/json does: by handing the quoted
// text to time.Time's UnmarshalJSON, unless it is in the form almost every
// stored time has (utcTime).
func (d *canonical) time(out *time.Time) bool {
	start := d.i
	text, ok := d.span()
	if !ok {
		return false
	}
	if t, ok := utcTime(text); ok {
		*out = t
		return true
	}
	return out.UnmarshalJSON([]byte(d.s[start:d.i])) == nil
}

// utcTime parses s if it is a time in UTC as time.Time's MarshalJSON
// writes one, "2006-01-02T15:04:05Z" with a fraction of 1 to 9 digits or
// none, and returns what UnmarshalJSON would. For anything else it
// reports false and the caller parses it the general way. A record with a
// full trail holds eighteen times; the general parser, building each
// through time.Date, was a sixth of decoding one.
func utcTime(s string) (time.Time, bool) {
	sec, nsec, ok := utcUnix(s, nil)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(sec, nsec).UTC(), true
}

// utcUnix is utcTime as Unix seconds and nanoseconds.
func utcUnix(s string, last *lastDate) (sec, nsec int64, ok bool) {
	if len(s) < len("2006-01-02T15:04:05Z") || s[len(s)-1] != 'Z' ||
		s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return 0, 0, false
	}
	var days int64
	if last != nil && last.date != "" && s[:10] == last.date {
		days = last.days
	} else {
		year, ok1 := decimal(s[0:4])
		month, ok2 := decimal(s[5:7])
		day, ok3 := decimal(s[8:10])
		if !ok1 || !ok2 || !ok3 || month < 1 || month > 12 || day < 1 || day > daysIn(month, year) {
			return 0, 0, false
		}
		days = daysSinceEpoch(year, month, day)
		if last != nil {
			last.date, last.days = s[:10], days
		}
	}
	hour, ok4 := decimal(s[11:13])
	minute, ok5 := decimal(s[14:16])
	second, ok6 := decimal(s[17:19])
	if !ok4 || !ok5 || !ok6 || hour > 23 || minute > 59 || second > 59 {
		return 0, 0, false
	}
	if frac := s[19 : len(s)-1]; frac != "" {
		digits := frac[1:]
		n, ok := decimal(digits)
		if frac[0] != '.' || len(digits) > 9 || !ok {
			return 0, 0, false
		}
		for range 9 - len(digits) {
			n *= 10
		}
		nsec = n
	}
	return days*86400 + hour*3600 + minute*60 + second, nsec, true
}

// lastDate is the date (its "2006-01-02" text) of the time utcUnix read
// last, and its days since the epoch: the times of a trail are mostly
// of a few days, so most are read as a clock time on a known day.
type lastDate struct {
	date string
	days int64
}

// decimal reads s, one or more ASCII digits, as a number.
func decimal(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// daysIn is the number of days of month in year, in the proleptic
// Gregorian calendar time uses.
func daysIn(month, year int64) int64 {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysSinceEpoch is the number of days from 1970-01-01 to the date (a
// negative number before it), by Howard Hinnant's days_from_civil.
func daysSinceEpoch(year, month, day int64) int64 {
	if month <= 2 {
		year--
	}
	era := year / 400
	if year < 0 && year%400 != 0 {
		era--
	}
	yoe := year - era*400
	mp := (month + 9) % 12
	doy := (153*mp+2)/5 + day - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// history reads the audit trail, if there is one (omitempty leaves an
// empty one out), and reports false for one that is not a valid trail:
// encoding/json then decodes it and the record says what is wrong.
//
// The entries go straight into the packed form a Trail keeps (texts as
// indexes, times as Unix seconds), with the checks NewTrail makes: no
// Entry is built, no time.Time for a time in UTC, and a text like the
// one before's (a move starts where the one before ended; reasons,
// actors and owners repeat) costs one comparison.
func (d *canonical) history(out *Trail) bool {
	if !d.peek(`,"history":[`) {
		return true
	}
	d.i += len(`,"history":[`)
	var texts trailTexts
	var room [DefaultHistoryLimit]packedEntry
	packed := room[:0]
	var zones []*time.Location
	for {
		if len(packed) == MaxHistory {
			return false // one too many: encoding/json's path says so
		}
		packed = append(packed, packedEntry{})
		var prev *packedEntry
		if n := len(packed); n > 1 {
			prev = &packed[n-2]
		}
		zone, ok := d.entry(&texts, &packed[len(packed)-1], prev)
		if !ok {
			return false
		}
		if zone != nil && zones == nil {
			zones = make([]*time.Location, len(packed)-1, cap(packed))
		}
		if zones != nil {
			zones = append(zones, zone)
		}
		if d.lit(`]`) {
			break
		}
		if !d.lit(`,`) {
			return false
		}
	}
	// The input was checked to be UTF-8 as a whole (DecodeJSON); each
	// distinct text once more costs a few nanoseconds and keeps this
	// decoder's answer NewTrail's whoever calls it.
	for _, t := range texts.list() {
		if !utf8.ValidString(t) {
			return false
		}
	}
	*out = packedTrail(texts.list(), slices.Clone(packed), zones, nil)
	return true
}

// trailTexts are the distinct texts of a trail being read, in the
// order first read, and their indexes once there are many. They are
// kept in room, not a slice of it, while room holds them: a slice of
// room stored through the pointer methods take would move room to the
// heap, an allocation a record.
type trailTexts struct {
	room [5 * DefaultHistoryLimit]string
	n    int      // how many of room are texts, while more is nil
	more []string // every text, once there are more than room holds
	at   map[string]uint16
}

// list is every text so far.
func (t *trailTexts) list() []string {
	if t.more != nil {
		return t.more
	}
	return t.room[:t.n]
}

// find returns the index of s, if it is a text already.
func (t *trailTexts) find(s string) (uint16, bool) {
	return findText(t.list(), t.at, s)
}

// add adds s, which is not a text yet, and returns its index.
func (t *trailTexts) add(s string) uint16 {
	var k uint16
	if t.more == nil && t.n < len(t.room) {
		var list []string
		list, t.at, k = addText(t.room[:t.n], t.at, s)
		t.n = len(list)
		return k
	}
	if t.more == nil {
		t.more = append(make([]string, 0, 2*len(t.room)), t.room[:]...)
	}
	t.more, t.at, k = addText(t.more, t.at, s)
	return k
}

// text reads a string of at most limit bytes after key, and returns its
// index among texts, guessing it is texts[like] when guess is set; an
// optional one (left out when empty) is the empty text when key is not
// next.
func (d *canonical) text(texts *trailTexts, key string, optional bool, like uint16, guess bool, limit int) (uint16, bool) {
	if optional && !d.peek(key) {
		k, ok := texts.find("")
		if !ok {
			k = texts.add("")
		}
		return k, true
	}
	if !d.lit(key) {
		return 0, false
	}
	if guess {
		// The text before's, quoted, is this one: it was checked when
		// first read, and holds no quote, backslash or control
		// character, so span would stop where it ends. Whenever this
		// does not take it, the span below is another text (or the
		// empty one an optional field may not have).
		if t := texts.list()[like]; !optional || t != "" {
			if end := d.i + 1 + len(t); end < len(d.s) && d.s[end] == '"' && d.s[d.i] == '"' && d.s[d.i+1:end] == t {
				d.i = end + 1
				return like, true
			}
		}
	}
	view, ok := d.span()
	if !ok || len(view) > limit || optional && view == "" {
		return 0, false
	}
	k, ok := texts.find(view)
	if !ok {
		k = texts.add(d.keep(view))
	}
	return k, true
}

// entry reads an entry into e, which follows prev (nil for the first),
// its texts among texts, and returns its zone if that is not UTC. The
// entries are read in place: a packed entry is 40 bytes, and copying
// each in and out of the calls was a seventh of reading a trail.
func (d *canonical) entry(texts *trailTexts, e, prev *packedEntry) (*time.Location, bool) {
	guess := prev != nil
	var like packedEntry
	if guess {
		like = packedEntry{from: prev.to, to: prev.from, reason: prev.reason, actor: prev.actor, owner: prev.owner}
	}
	var zone *time.Location
	var ok bool
	if e.from, ok = d.text(texts, `{"from":`, false, like.from, guess, MaxStatusLen); !ok {
		return nil, false
	}
	if e.to, ok = d.text(texts, `,"to":`, false, like.to, guess, MaxStatusLen); !ok {
		return nil, false
	}
	if e.reason, ok = d.text(texts, `,"reason":`, true, like.reason, guess, MaxReasonLen); !ok {
		return nil, false
	}
	if e.actor, ok = d.text(texts, `,"actor":`, true, like.actor, guess, MaxOwnerLen); !ok {
		return nil, false
	}
	if e.owner, ok = d.text(texts, `,"owner":`, true, like.owner, guess, MaxOwnerLen); !ok {
		return nil, false
	}
	done := d.lit(`,"epoch":`) && d.uint(&e.epoch) &&
		d.lit(`,"at":`) && d.instant(&e.sec, &e.nsec, &zone) &&
		d.lit(`,"revision":`) && d.uint(&e.revision) &&
		d.lit(`}`) &&
		(!guess || e.revision > prev.revision)
	return zone, done
}

// instant reads a time as time reads one, into the Unix seconds and
// nanoseconds a packed entry keeps, and its zone if it is not UTC.
func (d *canonical) instant(sec *int64, nsec *int32, zone **time.Location) bool {
	// Most are "2006-01-02T15:04:05Z": what utcUnix accepts is digits
	// and separators, so no quote, backslash or control character the
	// span would have stopped at.
	const quotedLen = len(`"2006-01-02T15:04:05Z"`)
	if end := d.i + quotedLen; end <= len(d.s) && d.s[d.i] == '"' && d.s[end-1] == '"' {
		if s, ns, ok := utcUnix(d.s[d.i+1:end-1], &d.lastDate); ok {
			*sec, *nsec, d.i = s, int32(ns), end
			return true
		}
	}
	start := d.i
	text, ok := d.span()
	if !ok {
		return false
	}
	if s, ns, ok := utcUnix(text, &d.lastDate); ok {
		*sec, *nsec = s, int32(ns)
		return true
	}
	var t time.Time
	if t.UnmarshalJSON([]byte(d.s[start:d.i])) != nil {
		return false
	}
	*sec, *nsec = t.Unix(), int32(t.Nanosecond())
	if loc := t.Location(); loc != time.UTC {
		*zone = loc
	}
	return true
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
