package admin

import (
	"context"
	"fmt"
	"testing"

	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/schema/schematest"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/stretchr/testify/require"
)

// Every layout grows Graphviz's memory for good, so a table is laid out
// once, whatever its counts, and a handler keeps the layouts of the few
// tables a rolling upgrade goes through.
func TestATableIsLaidOutOnceWhateverItsCounts(t *testing.T) {
	ctx := context.Background()
	var c diagrams
	d, err := schema.Describe("teraslice", teraslice.Roles())
	require.NoError(t, err)
	for n := range 20 {
		svg, err := c.svg(ctx, d, map[string]int{"running": n, "failed": 1000000 + n})
		require.NoError(t, err)
		require.Contains(t, svg, fmt.Sprintf(">%d</text>", n))
		require.Contains(t, svg, fmt.Sprintf(">%d</text>", 1000000+n))
		require.NotContains(t, svg, countSlot)
	}
	require.Equal(t, 1, c.layouts)

	versions := []string{"quarantined", "held", "parked", "frozen"}
	for _, parked := range versions {
		v, err := schema.Describe("ci-jobs", schematest.CIJobs(t, parked))
		require.NoError(t, err)
		_, err = c.svg(ctx, v, nil)
		require.NoError(t, err)
	}
	require.Equal(t, 5, c.layouts)
	_, err = c.svg(ctx, d, nil)
	require.NoError(t, err)
	require.Equal(t, 6, c.layouts, "the oldest of five was let go")
	v, err := schema.Describe("ci-jobs", schematest.CIJobs(t, "frozen"))
	require.NoError(t, err)
	_, err = c.svg(ctx, v, nil)
	require.NoError(t, err)
	require.Equal(t, 6, c.layouts, "a kept one is not laid out again")
}
