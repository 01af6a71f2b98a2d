package storage

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
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
