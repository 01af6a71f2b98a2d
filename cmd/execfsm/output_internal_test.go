package main

import (
	"strings"
	"testing"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
	"github.com/stretchr/testify/require"
)

// The failovers' bookkeeping is shown as times, not as the Unix
// milliseconds the record keeps; a value that is not such a list is shown
// as it is.
func TestTheFailoverTimesAreShownAsTimes(t *testing.T) {
	first, second := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC), time.Date(2026, 12, 4, 9, 5, 0, 0, time.UTC)
	rec := storage.Record{ID: "ex-1", Status: "running", Meta: map[string]string{
		recovery.MetaFailovers: "1796374800000,1796375100000",
	}}
	require.Equal(t, first.UnixMilli(), int64(1796374800000), "the fixture's first time")
	require.Equal(t, second.UnixMilli(), int64(1796375100000), "the fixture's second time")
	var out strings.Builder
	require.NoError(t, (&printer{w: &out}).record(rec))
	require.Contains(t, out.String(), "2 unexpected restarts: 2026-12-04T09:00:00Z, 2026-12-04T09:05:00Z")

	rec.Meta[recovery.MetaFailovers] = "soon"
	out.Reset()
	require.NoError(t, (&printer{w: &out}).record(rec))
	require.Contains(t, out.String(), "soon")
}
