package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"golang.org/x/sync/singleflight"
	"maps"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/execfsm/execfsm/examples/internal/proc"
	"github.com/execfsm/execfsm/examples/internal/stores"
	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
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
	// Relocating is not a VILLAS state: it is what a manager that is
	// being moved (SIGTERM) writes for the simulators it drives, which
	// keep running meanwhile, and what the next manager resumes from.
	Relocating SimState = "relocating"
)

// simulatorTable is the simulator lifecycle, built with the same
// transition.Table any user table is: the manager starts an idle
// simulator, which runs, may pause and resume, stops back to idle or
// fails into error; a simulator whose process vanished is gone, for good.
// A manager being moved marks the simulators it drives relocating, and
// its successor returns each to the state it left.
func simulatorTable() (*transition.Table[SimState], error) {
	return transition.New(Idle).
		Allow(Idle, Starting, Gone).
		Allow(Starting, Running, Error, Stopping, Gone).
		Allow(Running, Paused, Stopping, Error, Gone).
		Allow(Paused, Running, Stopping, Error, Gone).
		Allow(Stopping, Idle, Error, Gone).
		Allow(Error, Idle, Gone).
		Allow(Starting, Relocating).
		Allow(Running, Relocating).
		Allow(Paused, Relocating).
		Return(Relocating, Starting, Running, Paused).
		Allow(Relocating, Idle, Error, Stopping, Gone).
		Terminal(Gone).
		Build()
}

// simulatorRoles say what each simulator state means to the startup and
// SIGTERM decisions of package recovery: idle and error run nothing;
// starting, running and paused do; a relocation whose record does not
// say what it left goes back to idle; a stop ends in idle; a failure is
// error; gone is over.
func simulatorRoles(table *transition.Table[SimState]) (*recovery.Roles[SimState], error) {
	return recovery.DefineRoles(table).
		NotStarted(Idle, Error).
		Running(Starting, Running, Paused).
		Relocating(Relocating, Idle).
		Stopping(Stopping, Idle).
		Failed(Error).
		Build()
}

// simulatorPolicy: a manager is restarted by its platform, and the
// simulators it drives live on without it, so a manager that died
// unasked is resumed (within the failover allowance) and one being moved
// relocates.
var simulatorPolicy = recovery.Policy{Platform: recovery.KubernetesJob, Work: recovery.Restartability(true),
	Failovers: recovery.Allowance{Count: 3, Window: 30 * time.Minute}}

// leaseTTL is how long a dead manager's ownership of its simulators
// outlives it on a store whose ownership is a lease (etcd): how long its
// successor may wait.
const leaseTTL = 2 * time.Second

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
	cfg    managerConfig
	world  worldView
	table  *transition.Table[SimState]
	decide *recovery.Decider[SimState]
	store  storage.Store
	holder string // this manager process, as the owner of its simulators

	mu    sync.Mutex
	view  map[string]simulator                       // by uuid
	owned map[string]*transition.Persisted[SimState] // simulators this manager owns, by uuid
	// taking makes one take-over of a simulator at a time: creating a
	// simulator takes it over while the loop, which has just listed its
	// record, may be reconciling it. Two take-overs through two handles
	// are two owners to the store, and the second waited for the first's
	// lease to end until it gave up.
	taking singleflight.Group
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
	code, err := manage(cfg)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	return code
}

// newManager returns a manager with nothing in memory, of the world w
// and the store.
func newManager(cfg managerConfig, w worldView, store storage.Store) (*manager, error) {
	table, err := simulatorTable()
	if err != nil {
		return nil, err
	}
	roles, err := simulatorRoles(table)
	if err != nil {
		return nil, err
	}
	decide, err := recovery.NewDecider(roles, simulatorPolicy)
	if err != nil {
		return nil, err
	}
	return &manager{cfg: cfg, world: w, table: table, decide: decide, store: store,
		holder: fmt.Sprintf("manager-%.8s-%d", cfg.UUID, os.Getpid()),
		view:   map[string]simulator{}, owned: map[string]*transition.Persisted[SimState]{}}, nil
}

// manage runs one life of a manager and returns its exit code.
func manage(cfg managerConfig) (int, error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	store, closeStore, err := cfg.Store.Open()
	if err != nil {
		return 0, err
	}
	defer closeStore()
	m, err := newManager(cfg, world{cfg.World}, store)
	if err != nil {
		return 0, err
	}
	code, err := m.run(ctx)
	// SIGTERM: the platform is moving this manager. Decide for every
	// simulator it owns what that means, as an execution controller
	// does for its execution.
	if relocated := m.terminate(); relocated != 0 && err == nil {
		code = relocated
	}
	return code, err
}

func (m *manager) run(ctx context.Context) (int, error) {
	cfg := m.cfg

	loop, err := reconcile.NewLoop(reconcile.Options[string]{
		Reconciler: m, Adopter: m, World: m.list, Known: m.known,
		Resync: 200 * time.Millisecond, Workers: 2, AdoptionObserver: m,
	})
	if err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	go func() { done <- loop.Run(ctx) }()
	// Recover first: simulators created before the adoption pass has
	// listed the world would look, to it, like records the world lost.
	if err := loop.Idle(ctx); err != nil {
		return 0, err
	}
	for _, l := range cfg.Create {
		if err := m.create(ctx, l); err != nil {
			return 0, err
		}
		loop.Add(l.UUID)
	}
	want := len(cfg.Create)
	deadline := time.Now().Add(cfg.Timeout)
	for {
		if err := loop.Idle(ctx); err != nil {
			return 0, err
		}
		if m.settled(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	m.printView()
	fmt.Println("ready")
	proc.Emit("ready")
	<-ctx.Done()
	return 0, <-done
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
		proc.Emit("view", "name", s.id.Name, "uuid", s.id.UUID, "state", string(s.state))
	}
}

func (m *manager) exec(uuid string) (*transition.Persisted[SimState], error) {
	return transition.NewPersisted(m.table, m.store, uuid, transition.PersistedOptions{Actor: fmt.Sprintf("manager-%.8s", m.cfg.UUID)})
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
	owned, err := m.own(ctx, l.UUID)
	if err != nil {
		return err
	}
	pid, err := proc.StartDetached("simulator", simulatorConfig{World: m.cfg.World, Label: l}, world{m.cfg.World}.path(l.UUID, ".log"))
	if err != nil {
		return err
	}
	fmt.Printf("started %s %s pid %d\n", l.Name, l.UUID, pid)
	proc.Emit("started", "name", l.Name, "uuid", l.UUID, "pid", strconv.Itoa(pid))
	_, err = owned.Fire(ctx, Starting, fmt.Sprintf("process %d started", pid))
	return err
}

// errOver says a simulator's record is terminal (gone): nothing to own.
var errOver = errors.New("the simulator's record is over")

// own returns the handle through which this manager drives simulator
// uuid, taking it over the first time with the startup decision an
// execution controller makes: the record says what the previous manager
// left (running after a crash: resume within the failover allowance;
// relocating: back to where it was; gone: refuse). A dead predecessor's
// lease is waited for; a live one is never taken over.
func (m *manager) own(ctx context.Context, uuid string) (*transition.Persisted[SimState], error) {
	h, err, _ := m.taking.Do(uuid, func() (any, error) { return m.takeOver(ctx, uuid) })
	if err != nil {
		return nil, err
	}
	return h.(*transition.Persisted[SimState]), nil
}

// takeOver is own for one caller at a time.
func (m *manager) takeOver(ctx context.Context, uuid string) (*transition.Persisted[SimState], error) {
	m.mu.Lock()
	h := m.owned[uuid]
	m.mu.Unlock()
	if h != nil {
		select {
		case <-h.Ownership().Lost():
			return nil, fmt.Errorf("simulator %s: this manager's ownership ended", uuid)
		default:
			return h, nil
		}
	}
	exec, err := m.exec(uuid)
	if err != nil {
		return nil, err
	}
	lease := storage.Lease{Holder: m.holder, TTL: leaseTTL, Wait: true, Reason: m.holder + " starting"}
	v, err := m.decide.Start(ctx, exec, lease)
	if v.Decision == recovery.DecisionRefuse {
		return nil, errOver
	}
	if err != nil {
		return nil, err
	}
	fmt.Printf("take over %s: %s %s → %s\n", uuid, v.Decision, v.From, v.To)
	proc.Emit("take-over", "uuid", uuid, "decision", v.Decision.String(), "from", string(v.From), "to", string(v.To))
	m.mu.Lock()
	m.owned[uuid] = exec
	m.mu.Unlock()
	return exec, nil
}

// terminate is the SIGTERM path: for every simulator this manager owns,
// the SIGTERM decision. A running simulator is marked relocating (it
// keeps running; the next manager resumes it) and let go at once. It
// returns the exit code the platform must see to replace this manager
// (non-zero when anything was relocated), or 0.
func (m *manager) terminate() int {
	m.mu.Lock()
	owned := maps.Clone(m.owned)
	m.mu.Unlock()
	code := 0
	for _, uuid := range slices.Sorted(maps.Keys(owned)) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		a, err := m.decide.Terminate(ctx, owned[uuid], nil)
		if err == nil && a.Kind != recovery.ActionRelocate {
			err = owned[uuid].Ownership().Release(ctx)
		}
		cancel()
		if err != nil {
			fmt.Printf("error terminate %s: %v\n", uuid, err)
			continue
		}
		fmt.Printf("%s %s\n", a.Kind, uuid)
		if a.Kind == recovery.ActionRelocate {
			code = a.ExitCode
		}
	}
	return code
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
	proc.Emit("lost", "uuid", uuid)
	return nil
}

// ObserveAdoption reports the adoption pass.
func (m *manager) ObserveAdoption(r reconcile.AdoptionReport[string]) {
	fmt.Printf("recovery listed %d adopted %d gone %d\n", r.Listed, len(r.Adopted), len(r.Gone))
}

// Reconcile makes the record of simulator uuid agree with the world,
// walking the simulator table along legal edges from what the record says
// to what the simulator reports (or to gone if its process is dead).
func (m *manager) Reconcile(ctx context.Context, uuid string) (reconcile.Result, error) {
	exec, err := m.own(ctx, uuid)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		// Never recorded: adopted into the store below if the world has
		// it, and owned from then on.
		if exec, err = m.exec(uuid); err != nil {
			return reconcile.Result{}, reconcile.TerminalError(err)
		}
	case errors.Is(err, errOver):
		exec, err = m.exec(uuid) // read only: the record is gone for good
		if err != nil {
			return reconcile.Result{}, reconcile.TerminalError(err)
		}
	case err != nil:
		return reconcile.Result{}, err
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
		if exec, err = m.own(ctx, uuid); err != nil {
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
	_ reconcile.AdoptionObserver[string] = (*manager)(nil)
)
