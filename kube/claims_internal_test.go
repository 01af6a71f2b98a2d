package kube

import (
	"fmt"
	"testing"

	"github.com/execfsm/execfsm/storage"
	"github.com/stretchr/testify/require"
)

// The claims remembered are bounded, and one is told only for the
// revision it was seen at.
func TestClaimsAreBoundedAndAnsweredOnlyForTheirRevision(t *testing.T) {
	var c claims
	_, ok := c.at("ex-1", 1)
	require.False(t, ok, "the zero value knows nothing")
	c.remember(storage.Record{ID: "ex-1", Revision: 7, Owner: "pod-a", Epoch: 2})
	claim, ok := c.at("ex-1", 7)
	require.True(t, ok)
	require.Equal(t, storage.Claim{Owner: "pod-a", Epoch: 2}, claim)
	_, ok = c.at("ex-1", 8)
	require.False(t, ok, "another revision: read it")
	for k := range maxClaims + 10 {
		c.remember(storage.Record{ID: fmt.Sprintf("ex-%d", k+2), Revision: 1})
	}
	require.Len(t, c.byID, maxClaims)
}
