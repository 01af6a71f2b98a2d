package storage

import (
	"encoding/json"
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
	require.Equal(t, slow, fast)

	minimal := []byte(`{"id":"ex-1","status":"pending","revision":0,"epoch":0,"updated_at":"0001-01-01T00:00:00Z","since":"0001-01-01T00:00:00Z"}`)
	fast, ok = decodeCanonical(minimal)
	require.True(t, ok)
	slow, err = decodeJSON(minimal)
	require.NoError(t, err)
	require.Equal(t, slow, fast)
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
		require.Equal(t, slow, fast, "%q", data)
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
		text, times := textGen(), timeGen()
		w := wireRecord{ID: text.Draw(rt, "id"), Status: text.Draw(rt, "status"), Previous: text.Draw(rt, "previous"),
			Revision: rapid.Uint64().Draw(rt, "revision"), Owner: text.Draw(rt, "owner"), Epoch: rapid.Uint64().Draw(rt, "epoch"),
			UpdatedAt: times.Draw(rt, "updated"), Since: times.Draw(rt, "since"), Reason: text.Draw(rt, "reason"),
			HistoryLimit: rapid.IntRange(-2, 300).Draw(rt, "limit")}
		for range rapid.IntRange(0, 4).Draw(rt, "entries") {
			w.History = append(w.History, Entry{From: text.Draw(rt, "from"), To: text.Draw(rt, "to"), Reason: text.Draw(rt, "ereason"),
				Actor: text.Draw(rt, "actor"), Owner: text.Draw(rt, "eowner"), Epoch: rapid.Uint64().Draw(rt, "eepoch"),
				At: times.Draw(rt, "at"), Revision: rapid.Uint64().Draw(rt, "erev")})
		}
		if rapid.Bool().Draw(rt, "meta") {
			w.Meta = rapid.MapOf(text, text).Draw(rt, "metamap")
		}
		want, wantErr := json.Marshal(w)
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
			require.Equal(rt, slow, back)
		}
	})
}
