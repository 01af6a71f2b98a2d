package fleettest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/execfsm/execfsm/reconcile"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/transition"
)

// settings are a validated Fleet and Bound, with what the explorer derives
// from them once.
type settings[S comparable] struct {
	fleet       Fleet[S]
	bound       Bound
	table       *transition.Table[S]
	running     S // what a controller that starts an execution walks to
	requeued    map[S]bool
	restartable bool
	failovers   recovery.Allowance
	abandoned   time.Duration
}

// phase is where a controller pod is in its life.
type phase uint8

const (
	phaseCreated  phase = iota + 1 // alive, not started (or waiting for a live holder)
	phaseSetup                     // started an execution that had not: moving it to running
	phaseWorking                   // driving the execution
	phaseStopping                  // finishing a stop
	phaseExited                    // exited on its own
	phaseKilled                    // SIGKILLed
	phaseWaiting                   // a manager holding a parked execution, or one whose backoff runs
)

// pod is one controller process of an execution.
type pod[S comparable] struct {
	name  string
	ex    *execution[S]
	phase phase
	cut   bool // its node is lost: alive, out of reach
	lost  bool // its platform gave it up with its node: its exit is nobody's
	exit  int
	exec  *transition.Persisted[S]
	store *actorStore[S]
}

func (p *pod[S]) alive() bool { return p.phase != phaseExited && p.phase != phaseKilled }

// holds reports whether p's ownership is live.
func (p *pod[S]) holds() bool {
	own := p.exec.Ownership()
	return own != nil && !storage.Ended(own)
}

// execution is one execution of the fleet, with its platform's Job (its
// pods) and what the explorer knows that the store does not.
type execution[S comparable] struct {
	id        string
	pods      []*pod[S]
	jobDone   bool // a pod the Job still counted exited 0: the Job succeeded
	stopAsked bool // the master's stop was written
	deaths    int  // controllers that died unasked
	counted   int  // unexpected restarts counted by a start
	resumes   []time.Time
	// seen is the reaper's memory of when it first saw the execution
	// running with nobody holding it (recovery.Reaper counts Abandoned
	// from then), under which claim.
	seen      *storage.Claim
	seenSince time.Time
	gone      bool // retired: its record was deleted
}

// world is one run of the fleet from its start: the store, the actors,
// the clock. A path replayed on a new world reaches the same state: the
// memory store and every decision are deterministic given the clock.
type world[S comparable] struct {
	s       *settings[S]
	ctx     context.Context
	now     time.Time
	mem     *storage.Memory
	execs   []*execution[S]
	nextPod int
	crashes int
	drains  int
	reruns  int
	reaper  *recovery.Reaper[S]
	master  *actorStore[S]
	reaping *actorStore[S]
	// retirer is the fleet's Retirer (Fleet.Retire), nil without one.
	retirer  *recovery.Retirer[S]
	retiring *actorStore[S]

	quiet bool     // replaying: no timeline, no checks
	lines []string // the timeline
	found *found   // the first invariant broken

	// races
	writes      int    // writes of the current step so far
	nested      bool   // running the action that races a write
	raceAt      int    // the write to race, 0 for none
	raceLabel   string // the action that races it
	raced       string // the race that happened, as a step suffix
	recording   bool   // collecting the races the step could have
	options     []race
	random      *rand.Rand // a walk's choice of races
	reaperWrote bool
}

// race is an action that may land before a step's write.
type race struct {
	write int
	label string
}

// found is a broken invariant.
type found struct {
	invariant, problem string
}

// action is one thing an actor of the fleet can do now.
type action struct {
	label  string
	writer string // who it writes as; "" for actions that write nothing
	run    func()
}

func newWorld[S comparable](ctx context.Context, s *settings[S], quiet bool) (*world[S], error) {
	w := &world[S]{s: s, ctx: ctx, now: epoch(), mem: storage.NewMemory(), quiet: quiet}
	w.master = &actorStore[S]{w: w, actor: "master", inner: w.mem}
	w.reaping = &actorStore[S]{w: w, actor: "reaper", inner: w.mem}
	if !s.fleet.NoReaper {
		opts := s.fleet.Reaper
		opts.Clock, opts.Actor = clock[S]{w}, "reaper"
		d, err := w.decider(nil)
		if err != nil {
			return nil, err
		}
		if w.reaper, err = d.NewReaper(w.reaping, opts); err != nil {
			return nil, fmt.Errorf("fleettest: %w: %v", ErrInvalidFleet, err)
		}
	}
	if s.fleet.Retire {
		w.retiring = &actorStore[S]{w: w, actor: "retirer", inner: w.mem}
		d, err := w.decider(nil)
		if err != nil {
			return nil, err
		}
		if w.retirer, err = d.NewRetirer(w.retiring, recovery.RetirerOptions{Clock: clock[S]{w}, Batch: 1}); err != nil {
			return nil, fmt.Errorf("fleettest: %w: %v", ErrInvalidFleet, err)
		}
	}
	u := transition.To(s.table.Initial()).Because("created")
	if work := s.fleet.Policy.Work; work != nil {
		u = u.Set(recovery.MetaRelocatable, fmt.Sprint(work.IsRestartable()))
	}
	ex, err := w.masterHandle("ex-1")
	if err != nil {
		return nil, err
	}
	if _, err := ex.Create(ctx, u); err != nil {
		return nil, fmt.Errorf("fleettest: creating ex-1: %w", err)
	}
	w.execs = append(w.execs, &execution[S]{id: "ex-1"})
	return w, nil
}

// clock is the explorer's time as a reconcile.Clock, for the Reaper,
// which only reads it.
type clock[S comparable] struct{ w *world[S] }

func (c clock[S]) Now() time.Time { return c.w.now }

func (c clock[S]) NewTimer(time.Duration) reconcile.Timer { return stopped{} }

// stopped is a timer that never fires: nothing in an exploration waits.
type stopped struct{}

func (stopped) C() <-chan time.Time { return nil }
func (stopped) Stop() bool          { return true }

// decider is a Decider deciding at the explorer's time; ex, if not nil,
// counts the restarts its starts write.
func (w *world[S]) decider(ex *execution[S]) (*recovery.Decider[S], error) {
	p := w.s.fleet.Policy
	p.Clock = func() time.Time { return w.now }
	d, err := recovery.NewDecider(w.s.fleet.Roles, p)
	if err != nil || ex == nil {
		return d, err
	}
	return d.WithObserver(recovery.Observer[S]{Startup: func(v recovery.Verdict[S], err error) {
		if err == nil && v.Failovers > 0 {
			ex.counted++
			if v.Decision == recovery.DecisionResume {
				ex.resumes = append(ex.resumes, w.now)
			}
		}
	}}), nil
}

// masterHandle returns a handle of the cluster master's on id, new for
// each action: a handle kept across actions would write first on the
// record it last saw, and every action of the master would add a write
// that conflicts, and a race point, to the exploration.
func (w *world[S]) masterHandle(id string) (*transition.Persisted[S], error) {
	return transition.NewPersisted(w.s.table, w.master, id, transition.PersistedOptions{Actor: "master", Clock: w.clock})
}

func (w *world[S]) clock() time.Time { return w.now }

// record returns ex's record as the store holds it.
func (w *world[S]) record(ex *execution[S]) storage.Record {
	rec, _ := w.mem.Get(w.ctx, ex.id)
	return rec
}

// status returns the state and role of rec.
func (w *world[S]) status(rec storage.Record) (S, recovery.Role) {
	cur, err := w.s.table.Parse(rec.Status)
	if err != nil {
		return cur, 0
	}
	role, _ := w.s.fleet.Roles.Role(cur)
	return cur, role
}

// ended reports whether cur is an end of an execution: a terminal state,
// or what a failure, a finished stop or the work's end writes.
func (w *world[S]) ended(cur S) bool {
	roles := w.s.fleet.Roles
	if role, _ := roles.Role(cur); role == recovery.RoleTerminal || cur == roles.Failed() {
		return true
	}
	if _, stopped, ok := roles.Stopping(); ok && cur == stopped {
		return true
	}
	if slices.Contains(w.s.fleet.Ends, cur) {
		return true
	}
	completed, terminated, ok := roles.Ends()
	return ok && (cur == completed || cur == terminated)
}

// actions are what the actors can do now, in a fixed order.
func (w *world[S]) actions() []action {
	var out []action
	for _, ex := range w.execs {
		rec := w.record(ex)
		cur, role := w.status(rec)
		out = w.podActions(out, ex, role)
		out = w.platformActions(out, ex)
		if role != 0 {
			out = w.masterActions(out, ex, cur, role)
		}
	}
	if w.retirer != nil && w.retireDue() {
		out = append(out, action{"retirer retire", "retirer", w.retire})
	}
	if _, ok := w.nextDue(); ok {
		out = append(out, action{"time tick", "", w.tick})
	}
	return out
}

// retention returns when ex's record, ended, may be retired; false if it
// has not ended, is kept for ever, or is gone.
func (w *world[S]) retention(ex *execution[S]) (time.Time, bool) {
	if ex.gone {
		return time.Time{}, false
	}
	rec := w.record(ex)
	cur, role := w.status(rec)
	if role != recovery.RoleTerminal {
		return time.Time{}, false
	}
	after, ok := w.s.fleet.Roles.Retention(cur)
	return rec.Since.Add(after), ok
}

// retireDue reports whether an execution's retention has passed.
func (w *world[S]) retireDue() bool {
	for _, ex := range w.execs {
		if at, ok := w.retention(ex); ok && !at.After(w.now) {
			return true
		}
	}
	return false
}

// retire is a pass of the fleet's Retirer.
func (w *world[S]) retire() {
	report, err := w.retirer.Retire(w.ctx)
	if err != nil {
		w.unexpected("retirer", err)
		return
	}
	if report.Retired == 0 {
		w.say("retirer", "retires nothing (%d skipped)", report.Skipped)
	}
}

// holders are the pods that hold execution id now.
func (w *world[S]) holders(id string) []string {
	var out []string
	for _, ex := range w.execs {
		for _, p := range ex.pods {
			if ex.id == id && p.holds() {
				out = append(out, p.name)
			}
		}
	}
	return out
}

// retired is told of a delete that landed: id is gone, and nobody may
// have held it (holders, as the delete was made).
func (w *world[S]) retired(actor, id string, holders []string) {
	for _, ex := range w.execs {
		if ex.id == id {
			ex.gone = true
		}
	}
	w.say(actor, "retires %s", id)
	if len(holders) > 0 {
		w.fail(InvariantRetiredStaysGone, "%s deleted %s while %s held it", actor, id, strings.Join(holders, ", "))
	}
}

// podActions are what ex's live controllers can do on their own, its
// record in a state of role.
func (w *world[S]) podActions(out []action, ex *execution[S], role recovery.Role) []action {
	for _, p := range ex.pods {
		if !p.alive() || p.cut {
			continue
		}
		switch p.phase {
		case phaseCreated:
			out = append(out, action{p.name + " start", p.name, func() { w.start(p, false) }})
		case phaseSetup:
			out = append(out, action{p.name + " run", p.name, func() { w.run(p) }})
		case phaseWorking:
			out = w.endActions(out, p)
			out = append(out,
				action{p.name + " fail", p.name, func() { w.finish(p, recovery.Ending{Err: errors.New("the work failed")}) }},
				action{p.name + " retry", p.name, func() { w.start(p, true) }})
		case phaseWaiting:
			if role == recovery.RoleNotStarted {
				// Moved on (a resume, a backoff's timer): the manager
				// sets it up again.
				out = append(out, action{p.name + " setup", "", func() { w.setUp(p) }})
			}
		}
		waits := p.phase == phaseSetup || p.phase == phaseWorking || p.phase == phaseWaiting
		if p.phase == phaseStopping || (role == recovery.RoleStopping && waits) {
			out = append(out, action{p.name + " stop", p.name, func() { w.finish(p, recovery.Ending{}) }})
		}
		if w.s.fleet.Policy.Manager && p.phase != phaseCreated && w.due(ex) {
			out = append(out, action{p.name + " advance", p.name, func() { w.advance(p) }})
		}
	}
	return out
}

// endActions are how p's work may end: finished (the roles' Ends), or
// in each end the fleet names (EndAs).
func (w *world[S]) endActions(out []action, p *pod[S]) []action {
	if _, _, ok := w.s.fleet.Roles.Ends(); ok {
		out = append(out, action{p.name + " finish", p.name, func() { w.finish(p, recovery.Ending{Finished: true}) }})
	}
	for _, end := range w.s.fleet.Ends {
		name, _ := w.s.table.Name(end)
		out = append(out, action{p.name + " finish " + name, p.name, func() { w.finishAs(p, end) }})
	}
	return out
}

// due reports whether a timer or a budget of ex's record is due now.
func (w *world[S]) due(ex *execution[S]) bool {
	d, ok, err := w.s.fleet.Roles.Due(w.record(ex), w.now)
	return err == nil && ok && !d.Due.After(w.now)
}

// advance is a manager's loop making the move that fell due.
func (w *world[S]) advance(p *pod[S]) {
	d, err := w.decider(p.ex)
	if err != nil {
		w.unexpected(p.name+" advance", err)
		return
	}
	_, _, err = d.Advance(w.ctx, p.exec)
	if errors.Is(err, storage.ErrFenced) {
		w.exitWith(p, 0, "fenced: "+err.Error())
		return
	}
	if err != nil {
		w.unexpected(p.name+" advance", err)
	}
}

// setUp is a waiting manager seeing its execution moved to a not-started
// state: it sets it up again.
func (w *world[S]) setUp(p *pod[S]) {
	p.phase = phaseSetup
	w.say(p.name, "sets %s up again", p.ex.id)
}

// platformActions are what ex's platform does: signals, lost nodes
// coming back, leases expiring, replacement pods.
func (w *world[S]) platformActions(out []action, ex *execution[S]) []action {
	b := w.s.bound
	for _, p := range ex.pods {
		if !p.alive() || p.cut {
			continue
		}
		if w.drains < b.Drains {
			out = append(out, action{"platform sigterm " + p.name, p.name, func() { w.sigterm(p) }})
		}
		if w.crashes < b.Crashes {
			out = append(out, action{"platform sigkill " + p.name, "", func() { w.sigkill(p) }})
			if p.phase != phaseCreated {
				out = append(out, action{"platform cut " + p.name, "", func() { w.cut(p) }})
			}
		}
	}
	for _, p := range ex.pods {
		if p.cut {
			out = append(out, action{"platform heal " + p.name, "", func() { w.heal(p) }})
		}
		if (!p.alive() || p.cut) && p.holds() {
			out = append(out, action{"time lease " + p.name, "", func() { w.expire(p) }})
		}
	}
	if w.canSpawn(ex) {
		out = append(out, action{"platform spawn " + ex.id, "", func() { w.spawn(ex) }})
	}
	return out
}

// masterActions are what the cluster master and the Reaper do with ex,
// in cur.
func (w *world[S]) masterActions(out []action, ex *execution[S], cur S, role recovery.Role) []action {
	master := w.s.fleet.Master
	if w.canStop(ex, cur, role) {
		out = append(out, action{"master stop " + ex.id, "master", func() { w.stop(ex) }})
	}
	for _, m := range master.Moves {
		if cur == m.From && !ex.stopAsked { // a stopped execution is not moved on again
			out = append(out, action{"master " + m.Name + " " + ex.id, "master", func() { w.move(ex, m) }})
		}
	}
	if master.Abandons && !w.ended(cur) && w.gaveUp(ex) {
		out = append(out, action{"master abandon " + ex.id, "master", func() { w.abandon(ex) }})
	}
	if role == recovery.RoleTerminal && w.reruns < master.Reruns {
		out = append(out, action{"master rerun " + ex.id, "master", func() { w.rerun(ex) }})
	}
	if w.reaper != nil && role != recovery.RoleTerminal {
		out = append(out, action{"reaper reap " + ex.id, "reaper", func() { w.reap(ex) }})
	}
	return out
}

// step runs the step label names: an action, and the race it may carry
// (" [race@N: action]", the action landing before the step's Nth
// write).
func (w *world[S]) step(label string) error {
	name, raced, hasRace := strings.Cut(label, " [race@")
	w.begin()
	if hasRace {
		at, other, ok := strings.Cut(strings.TrimSuffix(raced, "]"), ": ")
		n := 0
		if _, err := fmt.Sscan(at, &n); !ok || err != nil || n <= 0 || !strings.HasSuffix(raced, "]") {
			return fmt.Errorf("fleettest: %w: step %q: malformed race", ErrInvalidPath, label)
		}
		w.raceAt, w.raceLabel = n, other
	}
	for _, a := range w.actions() {
		if a.label == name {
			w.do(a)
			if w.raceAt > 0 && w.raced == "" {
				return fmt.Errorf("fleettest: %w: step %q: the action has no write %d another can race", ErrInvalidPath, label, w.raceAt)
			}
			if w.raceAt < 0 {
				return fmt.Errorf("fleettest: %w: step %q: %s cannot race that write", ErrInvalidPath, label, w.raceLabel)
			}
			return nil
		}
	}
	return fmt.Errorf("fleettest: %w: step %q is not possible here", ErrInvalidPath, label)
}

// begin forgets the last step's writes and races, before the next one.
func (w *world[S]) begin() {
	w.writes, w.raceAt, w.raceLabel, w.raced, w.nested = 0, 0, "", "", false
	w.options = w.options[:0]
}

// do runs a, turning a panic in the library's code into a violation.
func (w *world[S]) do(a action) {
	defer func() {
		if r := recover(); r != nil {
			w.fail(InvariantExpectedErrors, "%s panicked: %v", a.label, r)
		}
	}()
	a.run()
}

// beforeWrite is called before every write an actor makes: the point
// where another actor's action may land first.
func (w *world[S]) beforeWrite(writer string) {
	if w.nested {
		return
	}
	w.writes++
	if w.raceAt == 0 && !w.recording && w.random == nil {
		return
	}
	var others []action
	for _, a := range w.actions() {
		if a.writer != "" && a.writer != writer {
			others = append(others, a)
		}
	}
	if w.recording && w.raced == "" {
		for _, a := range others {
			w.options = append(w.options, race{write: w.writes, label: a.label})
		}
	}
	var pick *action
	switch {
	case w.raceAt == w.writes:
		for i := range others {
			if others[i].label == w.raceLabel {
				pick = &others[i]
			}
		}
		if pick == nil {
			w.raceAt = -1 // reported by step
			return
		}
	case w.random != nil && w.raced == "" && len(others) > 0 && w.random.IntN(3) == 0:
		pick = &others[w.random.IntN(len(others))]
	default:
		return
	}
	w.raced = fmt.Sprintf(" [race@%d: %s]", w.writes, pick.label)
	w.say("", "%s lands before %s's write", pick.label, writer)
	w.nested = true
	w.do(*pick)
	w.nested = false
}

// beforeLanding returns the record a write is about to replace, for
// landed; a replay, which neither tells nor checks, reads nothing.
func (w *world[S]) beforeLanding(ctx context.Context, id string) storage.Record {
	if w.quiet {
		return storage.Record{}
	}
	rec, _ := w.mem.Get(ctx, id)
	return rec
}

// landed is called after every write that landed, with the record it
// replaced (beforeLanding's) and the claim of the ownership it was made
// through (nil for a write as an outside authority): the timeline is
// told and the invariants on writes are checked here.
func (w *world[S]) landed(s *actorStore[S], before, after storage.Record, claim *storage.Claim) {
	if s.actor == "reaper" {
		w.reaperWrote = true
	}
	for _, ex := range w.execs {
		if ex.id == after.ID && ex.gone {
			w.fail(InvariantRetiredStaysGone, "%s wrote %s (%s) after it was retired", s.actor, after.ID, after.Status)
		}
	}
	if w.quiet {
		return
	}
	who := s.actor
	if after.Owner != "" && s.pod != nil {
		who = fmt.Sprintf("%s@%d", s.actor, after.Epoch)
	}
	e, _ := after.History.Last()
	switch {
	case before.Status == "":
		w.say(who, "%-12s   %-12s %s", "(created)", after.Status, e.Reason)
	case before.Status == after.Status && e.Owner != before.Owner:
		w.say(who, "%-12s   %-12s %s", after.Status, "(owner)", e.Reason)
	case before.Status == after.Status:
		w.say(who, "%-12s   %-12s %s", after.Status, "(meta)", e.Reason)
	default:
		w.say(who, "%-12s → %-12s %s", before.Status, after.Status, e.Reason)
	}
	w.checkAuditTrail(s.actor, before, after)
	if s.pod != nil {
		w.checkOneOwnerWrites(s.actor, before, after, claim)
	}
}

// say adds a line to the timeline: the time from the start, who, what.
func (w *world[S]) say(who, format string, args ...any) {
	if w.quiet {
		return
	}
	line := fmt.Sprintf("+%-7s %-10s %s", w.now.Sub(epoch()).String(), who, fmt.Sprintf(format, args...))
	if w.nested {
		line = "  " + line
	}
	w.lines = append(w.lines, strings.TrimRight(line, " "))
}

// fail records a broken invariant; the first one stands.
func (w *world[S]) fail(invariant, format string, args ...any) {
	if w.quiet || w.found != nil {
		return
	}
	w.found = &found{invariant: invariant, problem: fmt.Sprintf(format, args...)}
}

// unexpected records an error a controller is not told to expect.
func (w *world[S]) unexpected(what string, err error) {
	w.fail(InvariantExpectedErrors, "%s: %v", what, err)
}

func (w *world[S]) canSpawn(ex *execution[S]) bool {
	if ex.jobDone || len(ex.pods) >= w.s.bound.Pods {
		return false
	}
	for _, p := range ex.pods {
		if p.alive() && !p.lost {
			return false
		}
	}
	return true
}

// gaveUp reports whether ex's platform will make no more pods and none it
// made is alive and in reach: its Job failed.
func (w *world[S]) gaveUp(ex *execution[S]) bool {
	if ex.jobDone || len(ex.pods) < w.s.bound.Pods {
		return false
	}
	for _, p := range ex.pods {
		if p.alive() && !p.cut {
			return false
		}
	}
	return true
}

func (w *world[S]) spawn(ex *execution[S]) {
	w.nextPod++
	p := &pod[S]{name: fmt.Sprintf("pod-%d", w.nextPod), ex: ex, phase: phaseCreated}
	p.store = &actorStore[S]{w: w, actor: p.name, pod: p, inner: w.mem}
	exec, err := transition.NewPersisted(w.s.table, p.store, ex.id, transition.PersistedOptions{Actor: p.name, Clock: w.clock})
	if err != nil {
		w.unexpected("NewPersisted", err)
		return
	}
	p.exec = exec
	ex.pods = append(ex.pods, p)
	w.say("platform", "starts %s for %s", p.name, ex.id)
}

// exitWith ends p's process with code, as its platform sees it.
func (w *world[S]) exitWith(p *pod[S], code int, why string) {
	p.phase, p.exit = phaseExited, code
	w.say(p.name, "exits %d: %s", code, why)
	if code != 0 || p.lost || w.s.fleet.Policy.Manager {
		// A manager's Deployment replaces it whatever it exits with.
		return
	}
	p.ex.jobDone = true
	rec := w.record(p.ex)
	cur, role := w.status(rec)
	w.checkJobEndsWithExecution(p, why, rec, cur, role)
}

// start is a controller's startup, or a live controller retrying it.
func (w *world[S]) start(p *pod[S], retry bool) {
	d, err := w.decider(p.ex)
	if err != nil {
		w.unexpected(p.name+" start", err)
		return
	}
	v, err := d.Start(w.ctx, p.exec, storage.Lease{Holder: p.name})
	var held *storage.HeldError
	switch {
	case errors.As(err, &held) && retry:
		w.exitWith(p, w.s.fleet.Policy.LeaveExitCode(), fmt.Sprintf("%s holds %s", held.Holder, p.ex.id))
		return
	case errors.As(err, &held):
		w.say(p.name, "waits: %s holds %s", held.Holder, p.ex.id)
		return
	case errors.Is(err, recovery.ErrTerminalStatus):
		w.exitWith(p, 0, "refused: "+v.Reason)
		return
	case errors.Is(err, storage.ErrNotFound) && p.ex.gone:
		w.exitWith(p, 0, "its execution was retired")
		return
	case err != nil:
		w.unexpected(p.name+" start", err)
		return
	}
	roles := w.s.fleet.Roles
	switch v.Decision {
	case recovery.DecisionStart:
		p.phase = phaseSetup
	case recovery.DecisionResume:
		p.phase = phaseWorking
	case recovery.DecisionStop:
		if role, _ := roles.Role(v.To); role == recovery.RoleStopping {
			p.phase = phaseStopping
		} else {
			w.exitWith(p, 0, "the stop had ended")
		}
	case recovery.DecisionWait:
		if w.s.fleet.Policy.Manager {
			p.phase = phaseWaiting // a manager keeps what it holds
			return
		}
		w.exitWith(p, 0, v.Decision.String()+": "+v.Reason)
	default:
		w.exitWith(p, 0, v.Decision.String()+": "+v.Reason)
	}
}

// run moves an execution p started to its running state.
func (w *world[S]) run(p *pod[S]) {
	_, err := p.exec.Walk(w.ctx, w.s.running, "set up; running")
	if err == nil {
		p.phase = phaseWorking
		return
	}
	if errors.Is(err, storage.ErrFenced) {
		w.exitWith(p, w.s.fleet.Policy.LeaveExitCode(), "fenced: "+err.Error())
		return
	}
	_, role := w.status(w.record(p.ex))
	switch {
	case role == recovery.RoleStopping && errors.Is(err, transition.ErrNotAllowed):
		p.phase = phaseStopping
		w.say(p.name, "sees the stop")
	case role == recovery.RoleTerminal && errors.Is(err, transition.ErrNotAllowed):
		w.exitWith(p, 0, "the execution has ended")
	default:
		w.unexpected(p.name+" run", err)
	}
}

// finish is the end of p's work, or its shutdown (a zero ending).
func (w *world[S]) finish(p *pod[S], ending recovery.Ending) {
	w.end(p, func(d *recovery.Decider[S]) (recovery.Outcome[S], error) { return d.End(w.ctx, p.exec, ending, nil) })
}

// finishAs is p's work ending in end.
func (w *world[S]) finishAs(p *pod[S], end S) {
	name, _ := w.s.table.Name(end)
	w.end(p, func(d *recovery.Decider[S]) (recovery.Outcome[S], error) {
		return d.EndAs(w.ctx, p.exec, end, "the work ended in "+name, nil)
	})
}

// end writes the end decide decides and exits p as it says.
func (w *world[S]) end(p *pod[S], decide func(*recovery.Decider[S]) (recovery.Outcome[S], error)) {
	d, err := w.decider(p.ex)
	if err != nil {
		w.unexpected(p.name+" finish", err)
		return
	}
	end, err := decide(d)
	switch {
	case errors.Is(err, transition.ErrNotAllowed):
		// Work cannot end in a status whose table has no such move
		// (recovery.End's "not allowed"): the controller exits with
		// the error, and its platform starts another.
		w.exitWith(p, 1, err.Error())
	case err != nil:
		w.unexpected(p.name+" finish", err)
	default:
		w.exitWith(p, end.ExitCode, end.Kind.String())
	}
}

func (w *world[S]) sigterm(p *pod[S]) {
	w.drains++
	w.say("platform", "sends SIGTERM to %s", p.name)
	rec := w.record(p.ex)
	cur, role := w.status(rec)
	owned := p.holds() && rec.Claim() == p.exec.Claim()
	d, err := w.decider(p.ex)
	if err != nil {
		w.unexpected(p.name+" SIGTERM", err)
		return
	}
	a, err := d.Terminate(w.ctx, p.exec, nil)
	if err != nil {
		w.unexpected(p.name+" SIGTERM", err)
		return
	}
	switch a.Kind {
	case recovery.ActionShutdown:
		if p.phase == phaseCreated {
			w.exitWith(p, 0, "shut down before it started")
		} else {
			w.finish(p, recovery.Ending{})
		}
	default:
		w.exitWith(p, a.ExitCode, a.Kind.String())
	}
	w.checkDrainRelocates(p, owned, rec, cur, role)
}

func (w *world[S]) sigkill(p *pod[S]) {
	w.crashes++
	p.phase = phaseKilled
	p.ex.deaths++
	w.say("platform", "kills %s (SIGKILL)", p.name)
}

func (w *world[S]) cut(p *pod[S]) {
	w.crashes++
	p.cut, p.lost = true, true
	p.ex.deaths++
	w.say("platform", "loses %s's node; %s lives on, out of reach", p.name, p.name)
}

func (w *world[S]) heal(p *pod[S]) {
	p.cut = false
	w.say("platform", "brings %s's node back", p.name)
}

func (w *world[S]) expire(p *pod[S]) {
	if err := p.exec.Ownership().Release(w.ctx); err != nil {
		w.unexpected(p.name+" lease", err)
	}
	w.say("time", "%s's lease expires", p.name)
}

func (w *world[S]) canStop(ex *execution[S], cur S, role recovery.Role) bool {
	stopping, _, ok := w.s.fleet.Roles.Stopping()
	if w.s.fleet.Master.NoStop || !ok || ex.stopAsked || role == recovery.RoleTerminal || role == recovery.RoleStopping || w.ended(cur) {
		return false
	}
	return role == recovery.RoleRunning || role == recovery.RoleRelocating || w.s.table.Allowed(cur, stopping)
}

func (w *world[S]) stop(ex *execution[S]) {
	stopping, _, _ := w.s.fleet.Roles.Stopping()
	m, err := w.masterHandle(ex.id)
	if err != nil {
		w.unexpected("master stop", err)
		return
	}
	_, err = m.Fire(w.ctx, stopping, "stop requested")
	if err == nil {
		ex.stopAsked = true
		return
	}
	rec := w.record(ex)
	cur, role := w.status(rec)
	switch {
	case errors.Is(err, transition.ErrNotAllowed) && (role == recovery.RoleTerminal || w.ended(cur)):
		w.say("master", "stop refused: %s has ended", ex.id)
	case errors.Is(err, transition.ErrNotAllowed) && (role == recovery.RoleRunning || role == recovery.RoleRelocating):
		w.stopRefused(ex, rec, err)
	case errors.Is(err, transition.ErrNotAllowed):
		w.say("master", "stop refused in %s", rec.Status)
	default:
		w.unexpected("master stop", err)
	}
}

func (w *world[S]) move(ex *execution[S], mv Move[S]) {
	m, err := w.masterHandle(ex.id)
	if err != nil {
		w.unexpected("master "+mv.Name, err)
		return
	}
	if _, err := m.Fire(w.ctx, mv.To, mv.Name+" requested"); err != nil && !errors.Is(err, transition.ErrNotAllowed) {
		w.unexpected("master "+mv.Name, err)
	}
}

func (w *world[S]) abandon(ex *execution[S]) {
	m, err := w.masterHandle(ex.id)
	if err != nil {
		w.unexpected("master abandon", err)
		return
	}
	d, err := w.decider(nil)
	if err != nil {
		w.unexpected("master abandon", err)
		return
	}
	w.say("master", "%s's Job failed", ex.id)
	if _, err := d.Abandon(w.ctx, m, "the Job failed"); err != nil && !errors.Is(err, storage.ErrHeld) {
		w.unexpected("master abandon", err)
	}
}

func (w *world[S]) rerun(ex *execution[S]) {
	w.reruns++
	id := fmt.Sprintf("ex-%d", len(w.execs)+1)
	from, err := w.masterHandle(ex.id)
	if err != nil {
		w.unexpected("master rerun", err)
		return
	}
	to, err := w.masterHandle(id)
	if err != nil {
		w.unexpected("master rerun", err)
		return
	}
	var opts recovery.RerunOptions
	if work := w.s.fleet.Policy.Work; work != nil {
		opts.Meta = map[string]string{recovery.MetaRelocatable: fmt.Sprint(work.IsRestartable())}
	}
	if _, err := recovery.Rerun(w.ctx, w.s.fleet.Roles, from, to, opts); err != nil {
		w.unexpected("master rerun", err)
		return
	}
	w.execs = append(w.execs, &execution[S]{id: id})
}

func (w *world[S]) reap(ex *execution[S]) {
	w.reaperWrote = false
	if _, err := w.reaper.Reconcile(w.ctx, ex.id); err != nil {
		w.unexpected("reaper", err)
	}
	// What the reaper now remembers (recovery.Reaper counts an abandoned
	// execution from when it first saw it so): its rule, on the record
	// its last decision saw, which is the record now unless it wrote.
	rec := w.record(ex)
	_, role := w.status(rec)
	_, timed, _ := w.s.fleet.Roles.Due(rec, w.now)
	_, held, _ := w.mem.Held(w.ctx, ex.id)
	switch {
	case w.reaperWrote || timed || role != recovery.RoleRunning || rec.Owner == "" || w.s.abandoned == 0 || held:
		ex.seen = nil
	case ex.seen == nil || *ex.seen != rec.Claim():
		claim := rec.Claim()
		ex.seen, ex.seenSince = &claim, w.now
	}
}

// recentResumes are ex's resumes after unexpected restarts within the
// failovers' window (all of them without one).
func (w *world[S]) recentResumes(ex *execution[S]) []time.Time {
	var out []time.Time
	for _, t := range ex.resumes {
		if window := w.s.failovers.Window; window == 0 || w.now.Sub(t) < window {
			out = append(out, t)
		}
	}
	return out
}

// nextDue returns the next time something falls due: a status's
// deadline, an abandoned execution's, a restart leaving its window.
func (w *world[S]) nextDue() (time.Time, bool) {
	var next time.Time
	consider := func(t time.Time) {
		if t.After(w.now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, ex := range w.execs {
		if at, ok := w.retention(ex); ok {
			consider(at)
		}
		rec := w.record(ex)
		_, role := w.status(rec)
		if role == 0 || role == recovery.RoleTerminal {
			continue
		}
		if d, ok, _ := w.s.fleet.Roles.Due(rec, w.now); ok {
			consider(d.Due)
		}
		if ex.seen != nil && w.s.abandoned > 0 {
			consider(ex.seenSince.Add(w.s.abandoned))
		}
		if window := w.s.failovers.Window; window > 0 {
			counted, _ := recovery.FailoverCount(rec)
			for _, t := range counted.Times {
				consider(t.Add(window))
			}
		}
	}
	return next, !next.IsZero()
}

// tick moves the clock just past the next time something falls due.
func (w *world[S]) tick() {
	due, ok := w.nextDue()
	if !ok {
		return
	}
	w.now = due.Add(time.Second)
	w.say("time", "passes")
}

// check checks the invariants on the state, after a step.
func (w *world[S]) check() {
	if w.quiet || w.found != nil {
		return
	}
	s := w.s
	for _, ex := range w.execs {
		rec := w.record(ex)
		cur, role := w.status(rec)
		if ex.gone {
			// Retired once it had ended: the checks of a live
			// execution's are over, but for staying gone.
			if rec.ID != "" {
				w.fail(InvariantRetiredStaysGone, "%s was retired, and is %s again", ex.id, rec.Status)
				return
			}
			continue
		}
		_ = w.checkNoCrashLoop(ex) || w.checkRestartsAreCrashes(ex) || w.checkStopNeverLost(ex, rec, cur, role) ||
			w.checkNothingStranded(ex, rec, cur, role)
	}
	if len(s.fleet.Invariants) == 0 || w.found != nil {
		return
	}
	records, _, err := w.mem.List(w.ctx)
	if err != nil {
		w.unexpected("List", err)
		return
	}
	for _, inv := range s.fleet.Invariants {
		if err := inv.Check(records); err != nil {
			w.fail(inv.Name, "%v", err)
			return
		}
	}
}

// stranded reports whether nothing will ever move ex on.
func (w *world[S]) stranded(ex *execution[S], rec storage.Record, cur S, role recovery.Role) bool {
	s := w.s
	if role == 0 || role == recovery.RoleTerminal || role == recovery.RoleParked || w.ended(cur) || s.requeued[cur] {
		return false // over, parked for an outside authority, or placed again
	}
	for _, p := range ex.pods {
		if p.alive() && !p.cut {
			return false // it holds it, will start, or can take it back
		}
	}
	if s.fleet.Policy.Manager {
		return false // a manager's Deployment replaces it for as long as it exists
	}
	if !ex.jobDone && len(ex.pods) < s.bound.Pods {
		return false // its platform makes a replacement
	}
	if s.fleet.Master.Abandons && !ex.jobDone && role != recovery.RoleNotStarted {
		return false // the master ends it
	}
	if w.reaper == nil {
		return true
	}
	if _, timed, _ := s.fleet.Roles.Due(rec, w.now); timed {
		return false
	}
	return !(role == recovery.RoleRunning && s.abandoned > 0 && rec.Owner != "")
}

// epoch is the explorer's time zero.
func epoch() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
