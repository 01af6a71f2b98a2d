package embedded

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The ports of one cluster are all different: chosen one at a time and
// let go at once, 200 of them repeated one in 37 runs of 40, and a
// CI run had two members given one peer port.
func TestEveryPortChosenForAClusterIsDifferent(t *testing.T) {
	urls, release, err := freeURLs(200)
	require.NoError(t, err)
	defer release()
	seen := map[string]bool{}
	for _, u := range urls {
		require.False(t, seen[u.Host], "port %s chosen twice", u.Host)
		seen[u.Host] = true
	}
}
