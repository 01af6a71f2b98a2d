package kube_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execfsm/execfsm/kube"
	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/storage/storagetest"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// throttle puts the store user's requests in namespace ns into a
// priority level of their own that runs ~3 at a time and rejects the
// rest at once (429), borrowing nothing: an API server at its limit for
// this controller. It returns the FlowSchema's uid once the API server
// classifies requests with it.
func throttle(t *testing.T, ns string, probe kubernetes.Interface, seen *attempts) string {
	t.Helper()
	one, none := int32(1), int32(0)
	level, err := clientset.FlowcontrolV1().PriorityLevelConfigurations().Create(bg, &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: &one, LendablePercent: &none, BorrowingLimitPercent: &none,
				LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject},
			}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	schema, err := clientset.FlowcontrolV1().FlowSchemas().Create(bg, &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: level.Name},
			MatchingPrecedence:         300, // before every default schema but the system's
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: storeUser}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"},
					Resources: []string{"*"}, Namespaces: []string{ns}}},
			}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = clientset.FlowcontrolV1().FlowSchemas().Delete(bg, schema.Name, metav1.DeleteOptions{})
		_ = clientset.FlowcontrolV1().PriorityLevelConfigurations().Delete(bg, level.Name, metav1.DeleteOptions{})
	})
	uid := string(schema.UID)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := probe.CoreV1().ConfigMaps(ns).Get(bg, "probe", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "probe: %v", err)
		all := seen.snapshot()
		if all[len(all)-1].flowSchema == uid {
			return uid
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API server did not classify requests with FlowSchema %s within 30s", ns)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// At the API server's limits, a controller on the kube store slows down
// and finishes: every request the server refuses (429, from priority
// and fairness) is retried only after the Retry-After it said, each
// call makes a bounded number of attempts (client-go's ten retries,
// within the store's Timeout), a call that runs out of them is reported
// to the Loop's observer as the server's refusal or the call's deadline
// and retried later, and the Loop drives every execution through every
// step, exactly once each, while the server keeps refusing the excess.
func TestAtTheAPIServersLimitsTheLoadSlowsDownAndFinishes(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	var seen attempts
	client := seen.client(t, storeCfg)
	uid := throttle(t, ns, client, &seen)
	store, err := kube.New(client, kube.Options{Namespace: ns})
	require.NoError(t, err)

	const executions, steps, workers = 32, 4, 16
	keys := make([]string, executions)
	for k := range keys {
		keys[k] = fmt.Sprintf("ex-%03d", k)
		p, err := transition.NewPersisted(teraslice.Lifecycle(), store, keys[k], transition.PersistedOptions{})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(bg, time.Minute)
		_, err = createRetrying(ctx, p)
		cancel()
		require.NoError(t, err, keys[k])
	}
	var calls atomic.Int64
	var handles sync.Map
	finished := make(chan string, executions)
	var failuresMu sync.Mutex
	var failures []reconcile.ReconcileEvent[string]
	loop, err := reconcile.NewLoop(reconcile.Options[string]{Workers: workers, Resync: -1,
		ReconcileObserver: reconcile.ReconcileObserverFunc[string](func(ev reconcile.ReconcileEvent[string]) {
			if ev.Err != nil {
				failuresMu.Lock()
				failures = append(failures, ev)
				failuresMu.Unlock()
			}
		}),
		Reconciler: reconcile.ReconcilerFunc[string](func(ctx context.Context, key string) (reconcile.Result, error) {
			h, ok := handles.Load(key)
			if !ok {
				p, err := transition.NewPersisted(teraslice.Lifecycle(), store, key, transition.PersistedOptions{})
				if err != nil {
					return reconcile.Result{}, reconcile.TerminalError(err)
				}
				h, _ = handles.LoadOrStore(key, p)
			}
			ctx = context.WithValue(ctx, callKey{}, calls.Add(1))
			var done bool
			_, _, err := h.(*transition.Persisted[state.Status]).Apply(ctx, func(cur state.Status, rec storage.Record) (transition.Update[state.Status], error) {
				n, _ := strconv.Atoi(rec.Meta["step"])
				if n >= steps {
					done = true
					return transition.To(cur), nil
				}
				to := state.Paused
				if cur == state.Paused {
					to = state.Running
				}
				done = n+1 >= steps
				return transition.To(to).Because("load").Set("step", strconv.Itoa(n+1)), nil
			})
			if err != nil {
				return reconcile.Result{}, err
			}
			if done {
				finished <- key
				return reconcile.Result{}, nil
			}
			return reconcile.Result{RequeueAfter: time.Nanosecond}, nil
		})})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- loop.Run(ctx) }()
	loop.Add(keys...)
	for range executions {
		recv(t, finished, fmt.Sprintf("an execution finishing its %d steps (%+v)", steps, loop.Stats()))
	}
	cancel()
	require.NoError(t, <-ran)

	all := seen.snapshot()
	refused := 0
	lastOf := map[int64]attempt{}
	attemptsOf := map[int64]int{}
	for _, at := range all {
		if at.call == 0 {
			continue // the probe and the creation, not the load
		}
		require.Equal(t, uid, at.flowSchema, "every request of the load in the throttled level")
		if prev, ok := lastOf[at.call]; ok && prev.status == http.StatusTooManyRequests {
			require.Positive(t, prev.retryAfter, "a 429 says when to come back")
			require.GreaterOrEqual(t, at.sent.Sub(prev.came), prev.retryAfter-10*time.Millisecond,
				"call %d retried before the Retry-After the API server said", at.call)
		}
		if at.status == http.StatusTooManyRequests {
			refused++
		}
		lastOf[at.call] = at
		attemptsOf[at.call]++
	}
	require.Positive(t, refused, "the API server refused some requests: the test ran at its limit")
	for call, n := range attemptsOf {
		// A call is a read, a write and, when the write conflicts, a read:
		// at most eleven attempts each (client-go's ten retries).
		require.LessOrEqual(t, n, 3*11, "call %d", call)
	}
	// What failed is reported, says why, and comes back.
	for _, ev := range failures {
		require.True(t, apierrors.IsTooManyRequests(ev.Err) || errors.Is(ev.Err, context.DeadlineExceeded),
			"%s failed for a reason other than the server's limit: %v", ev.Key, ev.Err)
		require.Positive(t, ev.RetryIn, "%s is retried", ev.Key)
	}
	for _, key := range keys {
		rec, err := store.Get(bg, key)
		require.NoError(t, err)
		require.Equal(t, strconv.Itoa(steps), rec.Meta["step"], "%s took every step, once", key)
	}
	t.Logf("%d requests of the load, %d refused with 429; %d reconciles, %d failed", len(all), refused,
		loop.Stats().Reconciles, loop.Stats().Errors)
}

// createRetrying creates p's execution running, trying again while the
// API server refuses it.
func createRetrying(ctx context.Context, p *transition.Persisted[state.Status]) (storage.Record, error) {
	for {
		rec, err := p.Create(ctx, transition.To(state.Running).Set("step", "0"))
		if err == nil || !apierrors.IsTooManyRequests(err) {
			return rec, err
		}
		select {
		case <-ctx.Done():
			return storage.Record{}, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// Past the client's own rate limit a write waits for its turn, and one
// whose turn would come after its deadline fails at once, writing
// nothing; it succeeds when tried again once the client allows.
func TestPastTheClientsRateLimitAWriteWaitsOrFailsAtOnce(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	cfg := rest.CopyConfig(storeCfg)
	cfg.QPS, cfg.Burst = 1, 1 // a request a second
	client, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	const timeout = 300 * time.Millisecond
	store, err := kube.New(client, kube.Options{Namespace: ns, Timeout: timeout})
	require.NoError(t, err)

	// The burst's one token, through the same client (its limiter is the
	// client's) but with the default deadline: the creation is not what
	// is timed, and beside seven other tests an API round trip can take
	// longer than 300 ms (a CI run failed so).
	setup, err := kube.New(client, kube.Options{Namespace: ns})
	require.NoError(t, err)
	rec, err := setup.Create(bg, storagetest.Sample("ex-1"))
	require.NoError(t, err)
	next := rec
	next.Reason = "past the limit"
	began := time.Now()
	_, err = store.CompareAndSwap(bg, "ex-1", rec.Revision, next)
	require.Error(t, err, "the client's next turn is a second away, past the call's deadline")
	require.Less(t, time.Since(began), timeout, "failed at once, not at the deadline")
	got, err := newStoreIn(t, ns).Get(bg, "ex-1")
	require.NoError(t, err)
	require.Equal(t, rec.Revision, got.Revision, "nothing written")

	// With a deadline the turn fits in, the same write waits for it.
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	_, err = store.CompareAndSwap(ctx, "ex-1", rec.Revision, next)
	require.NoError(t, err)
}
