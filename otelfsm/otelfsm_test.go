package otelfsm_test

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/execfsm/execfsm/otelfsm"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/run"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pod is one controller process of the execution: run.Run with the
// module's observers, exporting to spans.
type pod struct {
	signals chan os.Signal
	started chan struct{}
	done    chan int
}

func startPod(t *testing.T, store storage.Store, name string, provider *sdktrace.TracerProvider, meter *sdkmetric.MeterProvider, finish bool) *pod {
	t.Helper()
	observers, err := otelfsm.RunObservers(teraslice.Roles(), otelfsm.Options{TracerProvider: provider, MeterProvider: meter})
	require.NoError(t, err)
	p := &pod{signals: make(chan os.Signal, 1), started: make(chan struct{}), done: make(chan int, 1)}
	go func() {
		code, err := run.Run(context.Background(), run.Config[state.Status]{
			Roles: teraslice.Roles(), Store: store, ID: "ex-1", Holder: name, Platform: recovery.KubernetesJob,
			Resumable: true, Failovers: teraslice.Failovers, Signals: p.signals, Observers: observers,
			Work: func(ctx context.Context, _ *transition.Persisted[state.Status], _ state.Status) recovery.Ending {
				close(p.started)
				if finish {
					return recovery.Ending{Finished: true}
				}
				<-ctx.Done()
				return recovery.Ending{}
			},
		})
		if err != nil {
			t.Error(err)
		}
		p.done <- code
	}()
	return p
}

func (p *pod) await(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("the pod never %s", what)
	}
}

func (p *pod) exit(t *testing.T) int {
	t.Helper()
	select {
	case code := <-p.done:
		return code
	case <-time.After(20 * time.Second):
		t.Fatal("the pod never exited")
		return 0
	}
}

// spansNamed are the spans of name, in the order they ended.
func spansNamed(spans tracetest.SpanStubs, name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s tracetest.SpanStub, key attribute.Key) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.String()
		}
	}
	return ""
}

// A relocation is one trace: the SIGTERM the old pod got, its move to
// relocating, the new pod's startup and its take-over, each span a child
// of the one before, though the two pods share nothing but the store.
func TestARelocationIsOneTrace(t *testing.T) {
	store := storage.NewMemory()
	master, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Actor: "master"})
	require.NoError(t, err)
	_, err = master.Create(context.Background(), transition.To(state.Initializing).Because("placed"))
	require.NoError(t, err)

	// Each pod its own providers, as each process has; one exporter reads
	// both, as a collector would.
	spans := tracetest.NewInMemoryExporter()
	newProvider := func() *sdktrace.TracerProvider {
		return sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	}
	providerA, providerB := newProvider(), newProvider()
	defer providerA.Shutdown(context.Background())
	defer providerB.Shutdown(context.Background())
	reader := sdkmetric.NewManualReader()
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer meter.Shutdown(context.Background())

	a := startPod(t, store, "pod-a", providerA, meter, false)
	a.await(t, "ran the work", a.started)
	a.signals <- syscall.SIGTERM // the node is drained
	require.Equal(t, 143, a.exit(t), "relocated")
	rec, err := store.Get(context.Background(), "ex-1")
	require.NoError(t, err)
	require.Equal(t, "relocating", rec.Status)
	require.NotEmpty(t, rec.Meta[otelfsm.MetaTraceParent], "the relocation's trace travels in the record")

	b := startPod(t, store, "pod-b", providerB, meter, true)
	require.Equal(t, 0, b.exit(t), "completed")

	all := spans.GetSpans()
	sigterm := spansNamed(all, "execfsm.sigterm")
	require.Len(t, sigterm, 1)
	require.Equal(t, "relocate", attr(sigterm[0], otelfsm.AttrDecision))
	require.False(t, sigterm[0].Parent.IsValid(), "the SIGTERM starts its trace")
	trace := sigterm[0].SpanContext.TraceID()

	var relocation, takeOver tracetest.SpanStub
	for _, s := range spansNamed(all, otelfsm.SpanMove) {
		switch attr(s, otelfsm.AttrTo) {
		case "relocating":
			relocation = s
		}
		if attr(s, otelfsm.AttrFrom) == "relocating" {
			takeOver = s
		}
	}
	require.Equal(t, sigterm[0].SpanContext.SpanID(), relocation.Parent.SpanID(), "the move to relocating is the SIGTERM's")
	require.Equal(t, "running", attr(relocation, otelfsm.AttrFrom))
	require.Equal(t, "pod-a", attr(relocation, otelfsm.AttrActor))
	require.Equal(t, "1", attr(relocation, otelfsm.AttrEpoch))

	var startupB tracetest.SpanStub
	for _, s := range spansNamed(all, "execfsm.startup") {
		if s.SpanContext.TraceID() == trace {
			startupB = s
		}
	}
	require.True(t, startupB.SpanContext.IsValid(), "the new pod's startup is in the SIGTERM's trace")
	require.Equal(t, relocation.SpanContext.SpanID(), startupB.Parent.SpanID(), "a child of the move to relocating")
	require.True(t, startupB.Parent.IsRemote(), "read from the record, not from memory")
	require.Equal(t, "resume", attr(startupB, otelfsm.AttrDecision))
	require.Equal(t, "pod-b", attr(startupB, otelfsm.AttrOwner))
	require.Equal(t, "2", attr(startupB, otelfsm.AttrEpoch))
	require.Equal(t, startupB.SpanContext.SpanID(), takeOver.Parent.SpanID(), "the take-over is the startup's")
	require.Equal(t, "running", attr(takeOver, otelfsm.AttrTo))
	require.Equal(t, trace, takeOver.SpanContext.TraceID())

	// pod-a's own startup began a trace of its own: nothing to continue.
	startups := spansNamed(all, "execfsm.startup")
	require.Len(t, startups, 2)
	for _, s := range startups {
		if s.SpanContext.TraceID() != trace {
			require.False(t, s.Parent.IsValid())
			require.Equal(t, "start", attr(s, otelfsm.AttrDecision))
		}
	}

	// The metrics count what the spans show.
	var got metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &got))
	counts := map[string]int64{}
	for _, scope := range got.ScopeMetrics {
		for _, m := range scope.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, p := range sum.DataPoints {
					key := m.Name
					for _, kv := range p.Attributes.ToSlice() {
						key += " " + string(kv.Key) + "=" + kv.Value.String()
					}
					counts[key] += p.Value
				}
			}
		}
	}
	require.Equal(t, int64(1), counts["execfsm.sigterm.actions execfsm.decision=relocate execfsm.result=ok"], counts)
	require.Equal(t, int64(1), counts["execfsm.startup.decisions execfsm.decision=resume execfsm.result=ok"], counts)
	require.Equal(t, int64(1), counts["execfsm.transitions execfsm.from=running execfsm.result=ok execfsm.to=relocating"], counts)
}

// A startup that already runs in a trace of its own (an operator's
// reconcile) stays in it, linked to the relocation's.
func TestAStartupInATraceOfItsOwnLinksToTheRelocation(t *testing.T) {
	ctx := context.Background()
	store := storage.NewMemory()
	spans := tracetest.NewInMemoryExporter()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer provider.Shutdown(ctx)
	o, err := otelfsm.New(teraslice.Roles(), otelfsm.Options{TracerProvider: provider})
	require.NoError(t, err)
	policy := recovery.Policy{Platform: recovery.KubernetesJob, Work: recovery.Restartability(true), Failovers: teraslice.Failovers}
	decider, err := recovery.NewDecider(teraslice.Roles(), policy)
	require.NoError(t, err)
	decider = decider.WithObserver(o.Decisions())
	handle := func(holder string) *transition.Persisted[state.Status] {
		exec, err := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-2", transition.PersistedOptions{Actor: holder}, o.Moves())
		require.NoError(t, err)
		return exec
	}
	old := handle("pod-a")
	_, err = old.Create(ctx, transition.To(state.Running).Because("running before the drain"))
	require.NoError(t, err)
	_, err = decider.Start(ctx, old, storage.Lease{Holder: "pod-a"})
	require.NoError(t, err)
	a, err := decider.Terminate(ctx, old, nil)
	require.NoError(t, err)
	require.Equal(t, recovery.ActionRelocate, a.Kind)

	reconcileCtx, reconcile := provider.Tracer("operator").Start(ctx, "reconcile ex-2")
	_, err = decider.Start(reconcileCtx, handle("pod-b"), storage.Lease{Holder: "pod-b"})
	require.NoError(t, err)
	reconcile.End()

	var relocation, startup tracetest.SpanStub
	for _, s := range spans.GetSpans() {
		switch {
		case s.Name == otelfsm.SpanMove && attr(s, otelfsm.AttrTo) == "relocating":
			relocation = s
		case s.Name == "execfsm.startup" && attr(s, otelfsm.AttrOwner) == "pod-b":
			startup = s
		}
	}
	require.Equal(t, reconcile.SpanContext().SpanID(), startup.Parent.SpanID(), "the reconcile's child")
	require.Len(t, startup.Links, 1)
	require.Equal(t, relocation.SpanContext.SpanID(), startup.Links[0].SpanContext.SpanID(), "linked to the move to relocating")
}
