package storage

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// sampleEncoded is a record with every field set, as MarshalBinary
// writes it, without the format byte.
func sampleEncoded(t testing.TB) []byte {
	at := time.Date(2026, 12, 3, 16, 41, 37, 123456789, time.UTC)
	entries := make([]Entry, 3)
	for k := range entries {
		entries[k] = Entry{From: "paused", To: "running", Reason: "resumed ✓", Actor: "pod-a", Owner: "pod-a", Epoch: 2,
			At: at.Add(time.Duration(k) * time.Second), Revision: uint64(k + 1)}
	}
	entries[1].Reason, entries[1].Owner = "", "" // omitted fields
	trail, err := NewTrail(entries...)
	require.NoError(t, err)
	rec := Record{ID: "ex-1", Status: "running", Previous: "paused", Revision: 9, Owner: "pod-a", Epoch: 2,
		UpdatedAt: at, Since: at.Add(-time.Minute), Reason: "resumed", History: trail, HistoryLimit: 32,
		Meta: map[string]string{"restarts": "1", "realm": "lab-β", "empty": ""}}
	data, err := rec.MarshalBinary()
	require.NoError(t, err)
	return data[1:]
}

func TestCanonicalDecodeReadsWhatMarshalWrites(t *testing.T) {
	data := sampleEncoded(t)
	fast, ok := decodeCanonical(data)
	require.True(t, ok, "a record as MarshalBinary writes it is canonical: %s", data)
	slow, err := decodeJSON(data)
	require.NoError(t, err)
	requireSameDecoding(t, slow, fast)
	rec, err := fast.record()
	require.NoError(t, err)
	v := reflect.ValueOf(rec)
	for i := range v.NumField() {
		require.False(t, v.Field(i).IsZero(), "the sample leaves Record.%s unset: set it, so the fast path is tried on it", v.Type().Field(i).Name)
	}

	minimal := []byte(`{"id":"ex-1","status":"pending","revision":0,"epoch":0,"updated_at":"0001-01-01T00:00:00Z","since":"0001-01-01T00:00:00Z"}`)
	fast, ok = decodeCanonical(minimal)
	require.True(t, ok)
	slow, err = decodeJSON(minimal)
	require.NoError(t, err)
	requireSameDecoding(t, slow, fast)
}

// requireSameDecoding fails unless the canonical decoder's fast and
// encoding/json's slow make the same record, or both the same error:
// fast holds its trail packed, slow its entries.
func requireSameDecoding(t require.TestingT, slow, fast wireRecord, msgAndArgs ...any) {
	require.Nil(t, fast.History, msgAndArgs...)
	slowRec, slowErr := slow.record()
	fastRec, fastErr := fast.record()
	require.Equal(t, slowErr, fastErr, msgAndArgs...)
	require.Equal(t, slowRec, fastRec, msgAndArgs...)
}

// Anything outside the canonical form goes to encoding/json, which then
// decides: the fast path never accepts what encoding/json would read
// differently.
func TestCanonicalDecodeLeavesTheRestToEncodingJSON(t *testing.T) {
	good := string(sampleEncoded(t))
	for name, data := range map[string]string{
		"whitespace":        strings.Replace(good, `"id":`, `"id": `, 1),
		"escape":            strings.Replace(good, `"resumed"`, `"res\u0075med"`, 1),
		"upper-case key":    strings.Replace(good, `"status"`, `"STATUS"`, 1),
		"repeated key":      strings.Replace(good, `,"status":"running"`, `,"status":"running","status":"failed"`, 1),
		"fields reordered":  strings.Replace(good, `"id":"ex-1","status":"running"`, `"status":"running","id":"ex-1"`, 1),
		"empty previous":    strings.Replace(good, `"previous":"paused"`, `"previous":""`, 1),
		"null meta":         good[:strings.Index(good, `,"meta"`)] + `,"meta":null}`,
		"meta out of order": strings.Replace(good, `"empty":"","realm":"lab-β"`, `"realm":"lab-β","empty":""`, 1),
		"leading zero":      strings.Replace(good, `"revision":9`, `"revision":09`, 1),
		"exponent":          strings.Replace(good, `"revision":9`, `"revision":9e0`, 1),
		"negative limit":    strings.Replace(good, `"history_limit":32`, `"history_limit":-1`, 1),
		"trailing data":     good + ` `,
		"empty history":     strings.Replace(good, good[strings.Index(good, `,"history":[`):strings.Index(good, `],"history_limit"`)+1], `,"history":[]`, 1),
		"control character": strings.Replace(good, `"resumed"`, "\"res\tumed\"", 1),
	} {
		require.NotEqual(t, good, data, "%s: the case changes the record", name)
		_, ok := decodeCanonical([]byte(data))
		require.False(t, ok, name)
	}
}

// Whatever the canonical decoder accepts, encoding/json accepts too and
// decodes to the same record.
func FuzzCanonicalDecodeAgreesWithEncodingJSON(f *testing.F) {
	f.Add(sampleEncoded(f))
	f.Add([]byte(`{"id":"ex-1","status":"pending","revision":0,"epoch":0,"updated_at":"0001-01-01T00:00:00Z","since":"0001-01-01T00:00:00Z"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !utf8.Valid(data) {
			return // UnmarshalBinary refuses it before either decoder
		}
		fast, ok := decodeCanonical(data)
		if !ok {
			return
		}
		slow, err := decodeJSON(data)
		require.NoError(t, err, "canonical but refused by encoding/json: %q", data)
		requireSameDecoding(t, slow, fast, "%q", data)
	})
}

// textGen draws strings from the characters that decide the encoding:
// plain ones, those Marshal escapes, multi-byte runes, U+2028.
func textGen() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		escaped := []string{"<", ">", "&", `"`, `\`, "\n", "\u2028", "\u2029"}
		plain := []string{"a", "run", "β", "✓", " ", "\x7f", "é", "ex-1"}
		pool := plain
		if rapid.IntRange(0, 30).Draw(t, "rare") == 0 { // most records must be plain for the fast path to be tried
			pool = append(append([]string(nil), plain...), escaped...)
		}
		parts := rapid.SliceOfN(rapid.SampledFrom(pool), 0, 4).Draw(t, "parts")
		return strings.Join(parts, "")
	})
}

func timeGen() *rapid.Generator[time.Time] {
	return rapid.Custom(func(t *rapid.T) time.Time {
		sec := rapid.Int64Range(-70_000_000_000, 300_000_000_000).Draw(t, "sec") // years before 0 and after 9999 included
		tm := time.Unix(sec, rapid.Int64Range(0, 999_999_999).Draw(t, "nsec"))
		if rapid.Bool().Draw(t, "utc") {
			return tm.UTC()
		}
		if rapid.Bool().Draw(t, "whole hours") {
			return tm.In(time.FixedZone("", rapid.IntRange(-12, 14).Draw(t, "zone")*3600))
		}
		// Offsets with seconds, and beyond a day, which Marshal refuses.
		return tm.In(time.FixedZone("", rapid.IntRange(-200_000, 200_000).Draw(t, "offset")))
	})
}

// fill draws a T with every exported field set by reflection, so a field
// added to the wire form is generated, and so encoded and compared, with
// no change here; a field of a type fill does not know fails the test
// until it learns it.
func fill[T any](t *rapid.T, label string) T {
	var v T
	fillValue(t, reflect.ValueOf(&v).Elem(), label)
	return v
}

func fillValue(t *rapid.T, v reflect.Value, label string) {
	switch {
	case v.Type() == reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(timeGen().Draw(t, label)))
	case v.Kind() == reflect.String:
		v.SetString(textGen().Draw(t, label))
	case v.Kind() == reflect.Uint64:
		v.SetUint(rapid.Uint64().Draw(t, label))
	case v.Kind() == reflect.Int:
		v.SetInt(int64(rapid.IntRange(-2, 300).Draw(t, label)))
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				fillValue(t, v.Field(i), label+"."+f.Name)
			}
		}
	case v.Kind() == reflect.Slice:
		n := rapid.IntRange(-1, 4).Draw(t, label+" length") // -1: nil
		if n < 0 {
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			fillValue(t, v.Index(i), fmt.Sprintf("%s[%d]", label, i))
		}
	case v.Kind() == reflect.Map && v.Type().Key().Kind() == reflect.String && v.Type().Elem().Kind() == reflect.String:
		if rapid.Bool().Draw(t, label+" nil") {
			return
		}
		v.Set(reflect.ValueOf(rapid.MapOf(textGen(), textGen()).Draw(t, label)))
	default:
		t.Fatalf("fill: no generator for %s of type %s: teach fillValue the type", label, v.Type())
	}
}

// Every field of Record is in its wire form, under the same JSON name:
// a field added to Record but not to wireRecord would be dropped by
// MarshalBinary.
func TestTheWireFormHasEveryFieldOfRecord(t *testing.T) {
	wire := map[string]string{}
	wt, rt := reflect.TypeFor[wireRecord](), reflect.TypeFor[Record]()
	for i := range wt.NumField() {
		wire[wt.Field(i).Name], _, _ = strings.Cut(wt.Field(i).Tag.Get("json"), ",")
	}
	for i := range rt.NumField() {
		f := rt.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, ok := wire[f.Name]
		require.True(t, ok, "Record.%s has no field in wireRecord", f.Name)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		require.Equal(t, name, tag, "Record.%s is named differently in its wire form", f.Name)
	}
}

// The fast encoder writes exactly what encoding/json's Marshal writes,
// or leaves the record to it; and what it writes decodes on the fast
// path to the same record.
func TestCanonicalEncodeIsEncodingJSON(t *testing.T) {
	var fast, all int
	t.Cleanup(func() {
		if !t.Failed() && fast*5 < all {
			t.Errorf("only %d of %d records took the fast path: the property says little", fast, all)
		}
	})
	rapid.Check(t, func(rt *rapid.T) {
		all++
		w := fill[wireRecord](rt, "record")
		for k := range w.History { // a trail's entries are in revision order
			if k > 0 && w.History[k].Revision <= w.History[k-1].Revision {
				w.History[k].Revision = w.History[k-1].Revision + 1 + w.History[k].Revision%1000
			}
			w.History[k].At = w.History[k].At.Round(0)
		}
		want, wantErr := json.Marshal(w)
		trail, err := trailOf(w.History)
		if err != nil {
			rt.Skipf("not a trail: %v", err) // a revision past the largest
		}
		w.History, w.trail = nil, trail
		got, ok := appendCanonical(nil, &w)
		if !ok {
			return // encoding/json encodes it (or refuses it)
		}
		fast++
		require.NoError(rt, wantErr)
		require.Equal(rt, string(want), string(got))
		back, ok := decodeCanonical(got)
		if ok {
			slow, err := decodeJSON(got)
			require.NoError(rt, err)
			requireSameDecoding(rt, slow, back)
		}
	})
}

// The encoder's buffer is sized once for a record as a controller
// writes it: the hint covers the encoding, and not by twice over.
func TestEncodedSizeHintFitsTheRecord(t *testing.T) {
	var rec Record
	require.NoError(t, rec.UnmarshalBinary(append([]byte{recordFormatJSON}, sampleEncoded(t)...)))
	at := time.Date(2026, 12, 3, 16, 41, 37, 123456789, time.UTC)
	var err error
	for k := range DefaultHistoryLimit {
		rec.History, err = rec.History.Append(Entry{From: "running", To: "paused", Reason: "operator request",
			Actor: "controller-7f9c", Owner: "controller-7f9c", Epoch: 1 << 40, At: at, Revision: 1<<40 + uint64(k)}, DefaultHistoryLimit)
		require.NoError(t, err)
	}
	data, err := rec.MarshalBinary()
	require.NoError(t, err)
	require.GreaterOrEqual(t, rec.encodedSizeHint(), len(data)-1)
	require.Less(t, rec.encodedSizeHint(), 2*len(data))
}

// utcTime is the general parser's answer, faster: for every time it can
// be given, from year 0 to 9999 with any fraction, it reads back the
// time MarshalJSON wrote, equal to what UnmarshalJSON reads.
func TestUTCTimeReadsWhatMarshalJSONWrites(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sec := rapid.Int64Range(time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()).Draw(t, "sec")
		nsec := rapid.SampledFrom([]int64{0, 1, 500_000_000, 123_456_789, 999_999_999, 100}).Draw(t, "nsec")
		at := time.Unix(sec, nsec).UTC()
		raw, err := at.MarshalJSON()
		require.NoError(t, err)
		got, ok := utcTime(string(raw[1 : len(raw)-1]))
		require.True(t, ok, "%s", raw)
		var want time.Time
		require.NoError(t, want.UnmarshalJSON(raw))
		require.True(t, got == want, "%s: %#v, UnmarshalJSON %#v", raw, got, want)
	})
}

// Whatever utcTime accepts, UnmarshalJSON accepts too, as the same time;
// what it refuses goes to UnmarshalJSON, which decides.
func FuzzUTCTimeAgreesWithUnmarshalJSON(f *testing.F) {
	for _, s := range []string{
		"2026-12-03T12:00:00Z", "2026-12-03T16:41:37.123456789Z", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59.9Z",
		"2024-02-29T00:00:00Z", "2023-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-12-03T24:00:00Z",
		"2026-12-03T12:00:60Z", "2026-12-03T12:00:00.Z", "2026-12-03T12:00:00.1234567890Z", "2026-12-03T12:00:00+01:00",
		"2026-12-03 12:00:00Z", "+026-12-03T12:00:00Z", "2026-1a-03T12:00:00Z", "1900-02-29T00:00:00Z", "2000-02-29T00:00:00Z",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := utcTime(s)
		if !ok {
			return
		}
		var want time.Time
		if err := want.UnmarshalJSON([]byte(`"` + s + `"`)); err != nil {
			t.Fatalf("utcTime(%q) = %v; UnmarshalJSON refuses it: %v", s, got, err)
		}
		if got != want {
			t.Fatalf("utcTime(%q) = %#v; UnmarshalJSON reads %#v", s, got, want)
		}
	})
}

// Trails of every length up to past a full default one, with texts that
// repeat as real ones do, optional fields left out, times in and out of
// UTC: the canonical decoder packs them as NewTrail does.
func TestCanonicalDecodePacksTrailsAsNewTrailDoes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		pool := rapid.SliceOfN(textGen(), 1, 6).Draw(t, "texts")
		text := func(label string) string { return rapid.SampledFrom(pool).Draw(t, label) }
		n := rapid.IntRange(1, 40).Draw(t, "entries")
		entries := make([]Entry, n)
		revision := rapid.Uint64Range(0, 3).Draw(t, "first revision")
		var before time.Time
		for k := range entries {
			at := timeGen().Draw(t, "at")
			switch rapid.IntRange(0, 3).Draw(t, "plain") {
			case 1:
				at = time.Unix(rapid.Int64Range(0, 4_000_000_000).Draw(t, "sec"), rapid.Int64Range(0, 999_999_999).Draw(t, "nsec")).UTC()
			case 2, 3:
				// Near the time before, in UTC: mostly the same day (the
				// decoder remembers the last day it read), sometimes the
				// day before or after, or the next month's or year's.
				at = before.UTC().Add(time.Duration(rapid.Int64Range(-100_000, 100_000).Draw(t, "step s")) * time.Second)
				if k == 0 {
					at = time.Date(rapid.IntRange(1970, 2100).Draw(t, "year"), time.Month(rapid.IntRange(1, 12).Draw(t, "month")),
						rapid.IntRange(1, 31).Draw(t, "day"), rapid.IntRange(0, 23).Draw(t, "hour"), 0, 0, 0, time.UTC)
				}
			}
			before = at
			if _, err := at.MarshalJSON(); err != nil {
				at = time.Unix(0, 0).UTC() // beyond what JSON holds: not this test's
			}
			entries[k] = Entry{From: text("from"), To: text("to"), Reason: text("reason"), Actor: text("actor"), Owner: text("owner"),
				Epoch: rapid.Uint64Range(0, 5).Draw(t, "epoch"), At: at, Revision: revision}
			revision += rapid.Uint64Range(1, 1000).Draw(t, "step")
		}
		trail, err := NewTrail(entries...)
		if err != nil {
			t.Skip("not a trail:", err)
		}
		rec := Record{ID: "ex-1", Status: "running", History: trail, HistoryLimit: MaxHistory}
		data, err := rec.MarshalBinary()
		require.NoError(t, err)
		fast, ok := decodeCanonical(data[1:])
		if !ok {
			return // escapes or a zone encoding/json writes otherwise: its path
		}
		slow, err := decodeJSON(data[1:])
		require.NoError(t, err)
		requireSameDecoding(t, slow, fast) // encoding/json's path makes its trail with NewTrail
	})
}

// The fast path is the common one: a trail as a Persisted writes it
// (plain texts, times in UTC) is decoded by it, full and past full.
func TestCanonicalDecodeTakesTheTrailsAPersistedWrites(t *testing.T) {
	for _, n := range []int{1, DefaultHistoryLimit, DefaultHistoryLimit + 1, MaxHistory} {
		entries := make([]Entry, n)
		at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
		for k := range entries {
			entries[k] = Entry{From: "running", To: "paused", Reason: "operator request", Actor: "ctl", Owner: "ctl", Epoch: 3,
				At: at.Add(time.Duration(k) * 1500 * time.Millisecond), Revision: uint64(k + 1)}
			if k%2 == 1 {
				entries[k].From, entries[k].To, entries[k].Reason = "paused", "running", ""
			}
		}
		trail, err := NewTrail(entries...)
		require.NoError(t, err)
		data, err := Record{ID: "ex-1", Status: "running", History: trail, HistoryLimit: MaxHistory}.MarshalBinary()
		require.NoError(t, err)
		fast, ok := decodeCanonical(data[1:])
		require.True(t, ok, "%d entries", n)
		require.Equal(t, trail, fast.trail, "%d entries", n)
	}
	// Texts of their own in every entry: more than the decoder keeps on
	// its stack (five an entry of a default trail), past the count at
	// which texts are looked up in a map.
	many := make([]Entry, MaxHistory)
	for k := range many {
		many[k] = Entry{From: fmt.Sprint("s", k%7), To: fmt.Sprint("s", (k+1)%7), Reason: fmt.Sprint("reason ", k),
			Actor: fmt.Sprint("actor ", k/2), Owner: fmt.Sprint("owner ", k/3), Revision: uint64(k + 1)}
	}
	trail, err := NewTrail(many...)
	require.NoError(t, err)
	require.Greater(t, len(trail.texts), 5*DefaultHistoryLimit)
	data, err := Record{ID: "ex-1", Status: "running", History: trail, HistoryLimit: MaxHistory}.MarshalBinary()
	require.NoError(t, err)
	fast, ok := decodeCanonical(data[1:])
	require.True(t, ok, "many texts")
	require.Equal(t, trail, fast.trail, "many texts")
	// One past MaxHistory is not a trail: encoding/json's path says so.
	entries := make([]Entry, MaxHistory+1)
	for k := range entries {
		entries[k] = Entry{From: "a", To: "b", Revision: uint64(k + 1)}
	}
	encoded, err := json.Marshal(entries)
	require.NoError(t, err)
	data = []byte(`{"id":"ex-1","status":"running","revision":0,"epoch":0,"updated_at":"0001-01-01T00:00:00Z","since":"0001-01-01T00:00:00Z","history":` + string(encoded) + `}`)
	_, ok = decodeCanonical(data)
	require.False(t, ok)
}
