package recovery_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
)

// A controller restarted after an OOM kill finds its execution running.
// Within the failover allowance it resumes; the restart after that fails the
// execution instead of crash-looping.
func ExampleStartup() {
	rec := storage.Record{ID: "ex-1", Status: "running"}
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for range 3 {
		v, _ := recovery.Startup(teraslice.Roles(), rec, recovery.Policy{Platform: recovery.KubernetesJob, Work: slicer{true}, Failovers: recovery.Allowance{Count: 2, Window: time.Hour}}, now)
		fmt.Println(v.Decision, "→", v.To)
		rec.Meta = v.Meta // Decider.Start writes this with the decision
		rec.Status = v.To.String()
		now = now.Add(time.Minute)
	}

	rec = storage.Record{ID: "ex-2", Status: "relocating", Previous: "paused", Since: now}
	v, _ := recovery.Startup(teraslice.Roles(), rec, recovery.Policy{}, now)
	fmt.Println(v.Decision, "→", v.To)
	// Output:
	// resume → running
	// resume → running
	// fail → failed
	// resume → paused
}

// SIGTERM means "shut down" when the cluster master asked (stopping) and
// "relocate" when the platform is moving a controller whose work can be
// restarted.
func ExampleTerminate() {
	p := recovery.Policy{Platform: recovery.KubernetesJob, Work: slicer{true}, Failovers: teraslice.Failovers}
	for _, status := range []string{"stopping", "running"} {
		a, _ := recovery.Terminate(teraslice.Roles(), storage.Record{ID: "ex-1", Status: status}, storage.Claim{}, p)
		fmt.Println(status, "→", a.Kind, a.ExitCode)
	}
	// Output:
	// stopping → shutdown 0
	// running → relocate 143
}

// The deadline reaper runs in a loop over the executions' ids.
func ExampleReaper() {
	store := storage.NewMemory()
	exec, _ := transition.NewPersisted(teraslice.Lifecycle(), store, "ex-1", transition.PersistedOptions{Clock: func() time.Time { return time.Now().Add(-time.Hour) }})
	_, _ = exec.Create(context.Background(), transition.To(state.Relocating))

	decider, err := recovery.NewDecider(teraslice.Roles(), recovery.Policy{})
	if err != nil {
		fmt.Println(err)
		return
	}
	reaper, err := decider.NewReaper(store, recovery.ReaperOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	_, _ = reaper.Reconcile(context.Background(), "ex-1")
	cur, rec, _ := exec.Load(context.Background())
	fmt.Println(cur, "—", rec.Reason)
	// Output: failed — relocating for 1h0m0s, past its deadline of 15m0s
}

// A controller with a table of its own gives its states roles, and the
// decisions work for it as for executions: a VILLAS simulator manager
// restarted while its simulator was paused resumes it.
func ExampleDefineRoles() {
	type Sim string
	table, err := transition.New[Sim]("idle").
		Allow("idle", "running").
		Allow("running", "paused", "stopping", "error", "relocating").
		Allow("paused", "running", "stopping", "error", "relocating").
		Return("relocating", "running", "paused").
		Allow("relocating", "idle", "error").
		Allow("stopping", "idle", "error").
		Allow("error", "idle", "gone").
		Allow("idle", "gone").
		Terminal("gone").
		Build()
	if err != nil {
		panic(err)
	}
	roles, err := recovery.DefineRoles(table).
		NotStarted("idle", "error").
		Running("running", "paused").
		Relocating("relocating", "idle").
		Stopping("stopping", "idle").
		Failed("error").
		Build()
	if err != nil {
		panic(err)
	}
	role, _ := roles.Role("paused")
	fmt.Println("paused is", role)

	rec := storage.Record{ID: "sim-1", Status: "relocating", Previous: "paused", UpdatedAt: time.Now(), Since: time.Now()}
	v, _ := recovery.Startup(roles, rec, recovery.Policy{}, time.Now())
	fmt.Println(v.Decision, v.From, "→", v.To)

	_, err = recovery.DefineRoles(table).Running("running").Failed("idle").Build()
	fmt.Println(errors.Is(err, recovery.ErrInvalidRoles))
	// Output:
	// paused is running
	// resume relocating → paused
	// true
}

// When the work ends, or the controller is shut down before it does, the
// stored status and what the work did decide the final status.
func ExampleEnd() {
	for _, c := range []struct {
		status string
		ending recovery.Ending
	}{
		{"running", recovery.Ending{Finished: true}},
		{"running", recovery.Ending{Finished: true, Failures: 3}},
		{"running", recovery.Ending{}},  // SIGTERM, shut down early
		{"stopping", recovery.Ending{}}, // the cluster master asked
		{"stopped", recovery.Ending{}},  // ended meanwhile: statistics only
	} {
		end, _ := recovery.End(teraslice.Roles(), storage.Record{ID: "ex-1", Status: c.status}, storage.Claim{}, c.ending)
		fmt.Printf("%-8s %-5s → %s (%s)\n", c.status, end.Kind, end.To, end.Reason)
	}
	// Output:
	// running  write → completed (the work finished)
	// running  write → failed (the work finished with 3 failures)
	// running  write → terminated (shut down before the work could finish)
	// stopping write → stopped (stopped on request)
	// stopped  keep  → stopped (execution has already ended in stopped status)
}

// A failed execution is rerun in a new one (Teraslice's recover), which
// starts pending and whose controller learns on startup what it reruns.
func ExampleRerun() {
	ctx := context.Background()
	store := storage.NewMemory()
	open := func(id string) *transition.Persisted[state.Status] {
		exec, _ := transition.NewPersisted(teraslice.Lifecycle(), store, id, transition.PersistedOptions{Actor: "master"})
		return exec
	}
	failed := open("ex-1")
	_, _ = failed.Create(ctx, transition.To(state.Failed).Because("slice failures"))

	rec, err := recovery.Rerun(ctx, teraslice.Roles(), failed, open("ex-2"), recovery.RerunOptions{SliceType: "failed"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rec.ID, rec.Status, rec.Reason)

	v, _ := recovery.Startup(teraslice.Roles(), rec, recovery.Policy{}, time.Now())
	fmt.Println(v.Decision, "then recovering:", v.RerunOf)

	_, err = recovery.Rerun(ctx, teraslice.Roles(), open("ex-2"), open("ex-3"), recovery.RerunOptions{})
	fmt.Println(errors.Is(err, recovery.ErrNotEnded))
	// Output:
	// ex-2 pending reruns ex-1
	// start then recovering: ex-1
	// true
}
