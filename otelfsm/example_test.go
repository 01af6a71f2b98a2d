package otelfsm_test

import (
	"context"
	"fmt"
	"os"
	"syscall"

	"github.com/execfsm/execfsm/otelfsm"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/run"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A controller run by run.Run, traced: give RunObservers' observers to
// its Config. Here the pod is drained while the work runs; the spans of
// the SIGTERM and of its move to relocating are one trace, which the
// record carries for the next pod's startup.
func ExampleRunObservers() {
	ctx := context.Background()
	store := storage.NewMemory()
	master, _ := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-7", transition.PersistedOptions{Actor: "master"})
	if _, err := master.Create(ctx, transition.To(state.Initializing)); err != nil {
		fmt.Println(err)
		return
	}
	spans := tracetest.NewInMemoryExporter() // an OTLP exporter, in a program
	provider := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer provider.Shutdown(ctx)
	observers, err := otelfsm.RunObservers(teraslice.Roles(), otelfsm.Options{TracerProvider: provider})
	if err != nil {
		fmt.Println(err)
		return
	}
	signals := make(chan os.Signal, 1)
	code, err := run.Run(ctx, run.Config[state.Status]{
		Roles: teraslice.Roles(), Store: store, ID: "ex-7", Holder: "pod-a", Platform: recovery.KubernetesJob,
		Resumable: true, Signals: signals, Observers: observers,
		Work: func(ctx context.Context, _ *transition.Persisted[state.Status], _ state.Status) recovery.Ending {
			signals <- syscall.SIGTERM // the node is drained
			<-ctx.Done()
			return recovery.Ending{}
		},
	})
	fmt.Println(code, err)
	for _, s := range spans.GetSpans() {
		switch s.Name {
		case otelfsm.SpanMove:
			fmt.Println(s.Name, attr(s, otelfsm.AttrFrom), "→", attr(s, otelfsm.AttrTo))
		case "execfsm.sigterm":
			fmt.Println(s.Name, attr(s, otelfsm.AttrDecision))
		}
	}
	rec, _ := store.Get(ctx, "ex-7")
	fmt.Println(rec.Status, rec.Meta[otelfsm.MetaTraceParent] != "")
	// Output:
	// 143 <nil>
	// execfsm.move initializing → running
	// execfsm.move running → relocating
	// execfsm.sigterm relocate
	// relocating true
}
