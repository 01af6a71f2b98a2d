package kube_test

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// attempt is one HTTP request the store's client sent, as its transport
// saw it.
type attempt struct {
	call       int64 // the store call it belongs to (a Persisted.Apply)
	sent, came time.Time
	status     int
	retryAfter time.Duration // what a 429 said to wait
	flowSchema string        // the FlowSchema the API server put it in
}

// callKey carries a call's number in its context to the transport.
type callKey struct{}

// attempts records every request sent by a client its client method made.
type attempts struct {
	mu  sync.Mutex
	all []attempt
}

func (a *attempts) client(t *testing.T, base *rest.Config) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(base)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			call, _ := r.Context().Value(callKey{}).(int64)
			at := attempt{call: call, sent: time.Now()}
			resp, err := rt.RoundTrip(r)
			at.came = time.Now()
			if err == nil {
				at.status = resp.StatusCode
				at.flowSchema = resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID")
				if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil {
					at.retryAfter = time.Duration(s) * time.Second
				}
			}
			a.mu.Lock()
			a.all = append(a.all, at)
			a.mu.Unlock()
			return resp, err
		})
	})
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return client
}

// count is how many requests the client has sent so far.
func (a *attempts) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.all)
}

func (a *attempts) snapshot() []attempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]attempt(nil), a.all...)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
