package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/execfsm/execfsm/reconcile"

	"github.com/execfsm/execfsm/storage"

	"github.com/execfsm/execfsm/examples/internal/proc"
	"github.com/execfsm/execfsm/examples/internal/stores"
	"github.com/execfsm/execfsm/transition"
)

// SimState is a VILLAS simulator's state, a user-defined state type.
type SimState string

// The VILLAS simulator states.
const (
	Idle     SimState = "idle"
	Starting SimState = "starting"
	Running  SimState = "running"
	Paused   SimState = "paused"
	Stopping SimState = "stopping"
	Error    SimState = "error"
	Gone     SimState = "gone"
)

// simulatorTable is the simulator lifecycle, built with the same
// transition.Table any user table is: the manager starts an idle
// simulator, which runs, may pause and resume, stops back to idle or
// fails into error; a simulator whose process vanished is gone, for good.
func simulatorTable() (*transition.Table[SimState], error) {
	return transition.New(Idle).
		Allow(Idle, Starting, Gone).
		Allow(Starting, Running, Error, Stopping, Gone).
		Allow(Running, Paused, Stopping, Error, Gone).
		Allow(Paused, Running, Stopping, Error, Gone).
		Allow(Stopping, Idle, Error, Gone).
		Allow(Error, Idle, Gone).
		Terminal(Gone).
		Build()
}

// startTimeout is how long a simulator may take to come up before a
// manager that sees no trace of it calls it gone.
const startTimeout = 10 * time.Second

// managerConfig is what the supervisor tells a manager.
type managerConfig struct {
	Store   stores.Config `json:"store"`
	World   string        `json:"world"`
	UUID    string        `json:"uuid"`
	Create  []label       `json:"create,omitempty"` // simulators to start (a first life)
	Timeout time.Duration `json:"timeout"`
}

// manager is one life of a VILLAScontroller-style manager. Its view of
// the simulators lives in memory and dies with it; its store keeps one
// record per simulator it manages; the world keeps the truth.
type manager struct {
	cfg   managerConfig
	world worldView
	table *transition.Table[SimState]
	store storage.Store

	mu   sync.Mutex
	view map[string]simulator // by uuid
}

// worldView is what a manager reads of the world: the simulators' labels
// and whether each is alive and in which state.
type worldView interface {
	labels(manager string) ([]label, error)
	labelled(uuid string) bool
	state(uuid string) (string, bool)
}

type simulator struct {
	id    label
	state SimState
}

func runManager(raw json.RawMessage) int {
	var cfg managerConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		fmt.Println("error", err)
		return 1
	}
	if err := manage(cfg); err != nil {
		fmt.Println("error", err)
		return 1
	}
	return 0
}

func manage(cfg managerConfig) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	table, err := simulatorTable()
	if err != nil {
		return err
	}
	store, closeStore, err := cfg.Store.Open()
	if err != nil {
		return err
	}
	defer closeStore()
	m := &manager{cfg: cfg, world: world{cfg.World}, table: table, store: store, view: map[string]simulator{}}

	loop, err := reconcile.NewLoop(reconcile.Options[string]{
		Reconciler: m, Adopter: m, List: m.list, Known: m.known,
		Resync: 200 * time.Millisecond, Workers: 2, RecoveryObserver: m,
	})
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	// Recover first: simulators created before the recovery pass has
	// listed the world would look, to it, like records the world lost.
	if err := loop.Idle(ctx); err != nil {
		return err
	}
	for _, l := range cfg.Create {
		if err := m.create(ctx, l); err != nil {
			return err
		}
		loop.Add(l.UUID)
	}
	want := len(cfg.Create)
	deadline := time.Now().Add(cfg.Timeout)
	for {
		if err := loop.Idle(ctx); err != nil {
			return err
		}
		if m.settled(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	m.printView()
	fmt.Println("ready")
	<-ctx.Done()
	return <-done
}

// settled reports whether the view has want simulators none of which is
// still starting.
func (m *manager) settled(want int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.view) < want {
		return false
	}
	for _, s := range m.view {
		if s.state == Starting || s.state == Idle {
			return false
		}
	}
	return true
}

func (m *manager) printView() {
	m.mu.Lock()
	defer m.mu.Unlock()
	var names []string
	byName := map[string]simulator{}
	for _, s := range m.view {
		names = append(names, s.id.Name)
		byName[s.id.Name] = s
	}
	sort.Strings(names)
	for _, n := range names {
		s := byName[n]
		fmt.Printf("view %s %s %s realm=%s location=%s owner=%s\n", s.id.Name, s.id.UUID, s.state, s.id.Realm, s.id.Location, s.id.Owner)
	}
}

func (m *manager) exec(uuid string) (*transition.Persisted[SimState], error) {
	return transition.NewPersisted(m.table, m.store, uuid, transition.Actor("manager-"+m.cfg.UUID[:8]))
}

// identityMeta is what a simulator's record keeps of its identity: the
// same keys its Job (here, its label file) carries.
func identityMeta(l label) map[string]string {
	meta := map[string]string{}
	id := l.identity()
	maps.Copy(meta, id.Labels)
	maps.Copy(meta, id.Annotations)
	return meta
}

// create records a new simulator, starts its process and marks it
// starting.
func (m *manager) create(ctx context.Context, l label) error {
	exec, err := m.exec(l.UUID)
	if err != nil {
		return err
	}
	if _, err := exec.Create(ctx, transition.Update[SimState]{To: Idle, Reason: "created by the manager", Meta: identityMeta(l)}); err != nil {
		return err
	}
	pid, err := proc.StartDetached("simulator", simulatorConfig{World: m.cfg.World, Label: l}, world{m.cfg.World}.path(l.UUID, ".log"))
	if err != nil {
		return err
	}
	fmt.Printf("started %s %s pid %d\n", l.Name, l.UUID, pid)
	_, err = exec.Fire(ctx, Starting, fmt.Sprintf("process %d started", pid))
	return err
}

// list is the world's view: every live simulator of this manager, with
// the identity its label carries.
func (m *manager) list(context.Context) ([]reconcile.Item[string], error) {
	labels, err := m.world.labels(m.cfg.UUID)
	if err != nil {
		return nil, err
	}
	items := make([]reconcile.Item[string], len(labels))
	for k, l := range labels {
		items[k] = reconcile.Item[string]{Key: l.UUID, Identity: l.identity()}
	}
	return items, nil
}

// known is what this manager's store says it manages: the simulators it
// has records of that are not gone.
func (m *manager) known(ctx context.Context) ([]string, error) {
	lister, ok := m.store.(storage.Lister)
	if !ok {
		return nil, errors.New("the store cannot list")
	}
	recs, unreadable, err := lister.List(ctx)
	if err != nil {
		return nil, err
	}
	for _, u := range unreadable {
		// Left alone, and said so; every other simulator is recovered.
		fmt.Printf("unreadable %s: %v\n", u.ID, u.Err)
	}
	var ids []string
	for _, r := range recs {
		if r.Meta[keyManager] == m.cfg.UUID && r.Status != string(Gone) {
			ids = append(ids, r.ID)
		}
	}
	return ids, nil
}

// Adopt rebuilds the manager's in-memory simulator from the identity the
// world keeps, under the same UUID.
func (m *manager) Adopt(_ context.Context, it reconcile.Item[string]) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.view[it.Key]; !ok {
		m.view[it.Key] = simulator{id: labelOf(it.Identity.Labels, it.Identity.Annotations), state: Idle}
	}
	fmt.Printf("adopt %s %s\n", it.Identity.Annotations[keyName], it.Identity.Labels[keyUUID])
	return nil
}

// Gone hears of a simulator the manager had that the world lost.
func (m *manager) Gone(_ context.Context, uuid string) error {
	fmt.Printf("lost %s\n", uuid)
	return nil
}

// ObserveRecovery reports the recovery pass.
func (m *manager) ObserveRecovery(r reconcile.RecoveryReport[string]) {
	fmt.Printf("recovery listed %d adopted %d gone %d\n", r.Listed, len(r.Adopted), len(r.Gone))
}

// Reconcile makes the record of simulator uuid agree with the world,
// walking the simulator table along legal edges from what the record says
// to what the simulator reports (or to gone if its process is dead).
func (m *manager) Reconcile(ctx context.Context, uuid string) (reconcile.Result, error) {
	exec, err := m.exec(uuid)
	if err != nil {
		return reconcile.Result{}, reconcile.TerminalError(err)
	}
	// Read the label before the liveness: a simulator writes its label
	// only once it holds its lock, so a label seen first and no lock seen
	// after means the process died. The other order races a simulator
	// coming up between the two reads: "not alive" from before it locked,
	// "labelled" from after, and a live simulator written off as gone.
	labelled := m.world.labelled(uuid)
	reported, alive := m.world.state(uuid)
	want := Gone
	if alive {
		if want, err = m.table.Parse(reported); err != nil {
			return reconcile.Result{}, reconcile.TerminalError(fmt.Errorf("simulator %s reports %w", uuid, err))
		}
	}
	cur, rec, err := exec.Load(ctx)
	if err == nil && !alive && !labelled && (cur == Idle || cur == Starting) && time.Since(rec.Since) < startTimeout {
		// Started but not up yet (a Job whose pod is pending): look
		// again soon rather than call it gone.
		return reconcile.Result{RequeueAfter: 50 * time.Millisecond}, nil
	}
	if errors.Is(err, storage.ErrNotFound) {
		if !alive {
			return reconcile.Result{}, nil
		}
		// In the world but never recorded: adopt it into the store too.
		if err := m.recordAdopted(ctx, exec, uuid, want); err != nil {
			return reconcile.Result{}, err
		}
		cur = want
	} else if err != nil {
		return reconcile.Result{}, err
	}
	steps := m.table.Path(cur, want)
	if cur != want && len(steps) == 0 {
		// The record cannot follow the world (it says gone, the world
		// has the simulator running): say so rather than pretend.
		return reconcile.Result{}, reconcile.TerminalError(fmt.Errorf("simulator %s: the record says %s, the world %s, and the table has no way from one to the other",
			uuid, cur, reportedOrGone(reported, alive)))
	}
	for _, step := range steps {
		if _, err := exec.Fire(ctx, step, fmt.Sprintf("the world reports %s", reportedOrGone(reported, alive))); err != nil {
			return reconcile.Result{}, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if want == Gone {
		delete(m.view, uuid)
		return reconcile.Result{}, nil
	}
	s := m.view[uuid]
	if s.id.UUID == "" {
		s.id = identityFromMeta(rec.Meta)
	}
	s.state = want
	m.view[uuid] = s
	return reconcile.Result{}, nil
}

func (m *manager) recordAdopted(ctx context.Context, exec *transition.Persisted[SimState], uuid string, at SimState) error {
	labels, err := m.world.labels(m.cfg.UUID)
	if err != nil {
		return err
	}
	for _, l := range labels {
		if l.UUID == uuid {
			_, err := exec.Create(ctx, transition.Update[SimState]{To: at, Reason: "adopted from the world", Meta: identityMeta(l)})
			return err
		}
	}
	return fmt.Errorf("simulator %s has no label", uuid)
}

func reportedOrGone(reported string, alive bool) string {
	if !alive {
		return "its process gone"
	}
	return reported
}

func identityFromMeta(meta map[string]string) label { return labelOf(meta, meta) }

// ensure the manager satisfies the interfaces it is given as.
var (
	_ reconcile.Reconciler[string]       = (*manager)(nil)
	_ reconcile.Adopter[string]          = (*manager)(nil)
	_ reconcile.GoneHandler[string]      = (*manager)(nil)
	_ reconcile.RecoveryObserver[string] = (*manager)(nil)
)
