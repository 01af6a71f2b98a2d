// Package workload is what the reliability suite's clients do to a store:
// random moves through Persisted, random compare-and-swaps on the raw
// store, and controllers taking executions over and letting them go. Each
// call is recorded as a history.Op for the checker. It takes any
// storage.Store, so every store runs the same histories.
package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/execfsm/execfsm/reliability/history"
	"github.com/execfsm/execfsm/state"
	"github.com/execfsm/execfsm/storage"
	"github.com/execfsm/execfsm/teraslice"
	"github.com/execfsm/execfsm/transition"
)

// Targets are the random moves: the running statuses an execution
// spends its life in, the init statuses it starts through and, for
// refusals, pending. No terminal status and not stopping (whose only
// ways out are terminal): an execution that ended would leave only
// refusals for the rest of the history.
var Targets = []state.Status{
	state.Scheduling, state.Initializing, state.Running, state.Running, state.Paused, state.Paused,
	state.Failing, state.Recovering, state.Relocating, state.Relocating, state.Pending,
}

func refused(err error) bool { return errors.Is(err, transition.ErrNotAllowed) }

func noEffect(err error) bool {
	return errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrFenced)
}

// Fire runs ops random Fire calls as one client on ids of store and
// hands each recorded operation to emit.
func Fire(ctx context.Context, store storage.Store, client int, ids []string, ops int, seed uint64, emit func(history.Op)) error {
	rng := rand.New(rand.NewPCG(seed, uint64(client)))
	execs := map[string]*transition.Persisted[state.Status]{}
	for _, id := range ids {
		p, err := transition.NewPersisted(teraslice.Lifecycle(), store, id, transition.PersistedOptions{Actor: fmt.Sprint("client-", client), Retries: 50})
		if err != nil {
			return err
		}
		execs[id] = p
	}
	for range ops {
		id := ids[rng.IntN(len(ids))]
		to := Targets[rng.IntN(len(Targets))]
		call := history.Now()
		c, err := execs[id].Fire(ctx, to, "random move")
		ret := history.Now()
		outcome, from := history.Classify(c, err, refused, noEffect)
		emit(history.Op{Client: client, ID: id, Kind: "fire", To: to.String(), Outcome: outcome, From: from.String(), Call: call, Return: ret})
	}
	return nil
}

// CAS runs ops random Get and CompareAndSwap calls on the raw store.
func CAS(ctx context.Context, store storage.Store, client int, ids []string, ops int, seed uint64, emit func(history.Op)) error {
	rng := rand.New(rand.NewPCG(seed, uint64(client)))
	statuses := []string{"a", "b", "c", "d"}
	for range ops {
		id := ids[rng.IntN(len(ids))]
		call := history.Now()
		rec, err := store.Get(ctx, id)
		ret := history.Now()
		if err != nil {
			return err
		}
		emit(history.Op{Client: client, ID: id, Kind: "get", Status: rec.Status, Revision: rec.Revision, Call: call, Return: ret})
		next := rec.Clone()
		next.Status = statuses[rng.IntN(len(statuses))]
		call = history.Now()
		written, err := store.CompareAndSwap(ctx, id, rec.Revision, next)
		ret = history.Now()
		op := history.Op{Client: client, ID: id, Kind: "cas", Expect: rec.Revision, Status: next.Status, Call: call, Return: ret}
		var conflict *storage.ConflictError
		switch {
		case err == nil:
			op.Revision = written.Revision
		case errors.As(err, &conflict):
			op.Conflict, op.Revision = true, conflict.Current.Revision
		default:
			op.Failed = true
		}
		emit(op)
	}
	return nil
}

// Ownership runs rounds of a controller's life as one client: it tries
// to take a random execution over; if it gets it, it moves it a few times
// under its claim, lets it go, and now and then tries once more with the
// handle it let go of (a relocated controller still alive); if it does
// not, it may move it as an outside authority, as a cluster master does.
// Every acquire, release and move is recorded.
func Ownership(ctx context.Context, store storage.Store, client int, ids []string, rounds int, seed uint64, emit func(history.Op)) error {
	rng := rand.New(rand.NewPCG(seed, uint64(client)))
	holder := fmt.Sprint("client-", client)
	masters := map[string]*transition.Persisted[state.Status]{}
	for _, id := range ids {
		p, err := transition.NewPersisted(teraslice.Lifecycle(), store, id, transition.PersistedOptions{Actor: holder, Retries: 50})
		if err != nil {
			return err
		}
		masters[id] = p
	}
	fire := func(p *transition.Persisted[state.Status], id string) {
		to := Targets[rng.IntN(len(Targets))]
		claim := p.Claim()
		call := history.Now()
		c, err := p.Fire(ctx, to, "random move")
		ret := history.Now()
		outcome, from := history.Classify(c, err, refused, func(err error) bool { return errors.Is(err, storage.ErrConflict) })
		if errors.Is(err, storage.ErrFenced) {
			outcome = history.Fenced
		}
		emit(history.Op{Client: client, ID: id, Kind: "fire", To: to.String(), Outcome: outcome, From: from.String(),
			Holder: claim.Owner, Epoch: claim.Epoch, Call: call, Return: ret})
	}
	acquire := func(id string) (*transition.Persisted[state.Status], error) {
		owned, err := transition.NewPersisted(teraslice.Lifecycle(), store, id, transition.PersistedOptions{Actor: holder, Retries: 50})
		if err != nil {
			return nil, err
		}
		call := history.Now()
		_, rec, err := owned.Acquire(ctx, storage.Lease{Holder: holder, TTL: time.Minute}, nil)
		ret := history.Now()
		op := history.Op{Client: client, ID: id, Kind: "acquire", Holder: holder, Call: call, Return: ret}
		switch {
		case err == nil:
			op.Outcome, op.Epoch = history.Changed, rec.Epoch
		case errors.Is(err, storage.ErrHeld):
			op.Outcome = history.Held
		default:
			op.Outcome = history.Unknown
		}
		emit(op)
		return owned, err
	}
	staleWrites := 0
	for range rounds {
		id := ids[rng.IntN(len(ids))]
		owned, err := acquire(id)
		if err != nil {
			if rng.IntN(2) == 0 {
				fire(masters[id], id)
			}
			continue
		}
		// A second process under the same holder name (a pod restarted in
		// place while the first still runs) is refused like any other:
		// every round has a refusal, however the clients interleave.
		if other, err := acquire(id); err == nil {
			_ = other.Ownership().Release(ctx) // recorded as a violation already
		}
		for range 1 + rng.IntN(3) {
			fire(owned, id)
		}
		call := history.Now()
		err = owned.Ownership().Release(ctx)
		ret := history.Now()
		op := history.Op{Client: client, ID: id, Kind: "release", Holder: holder, Epoch: owned.Claim().Epoch, Outcome: history.Changed, Call: call, Return: ret}
		if err != nil {
			op.Outcome = history.Unknown
		}
		emit(op)
		if staleWrites == 0 || rng.IntN(3) == 0 {
			staleWrites++
			fire(owned, id) // the let-go handle: must never write
		}
	}
	return nil
}

// Concurrently runs clients goroutines of body, each with its client
// number, and returns every operation they recorded, or the first error.
func Concurrently(clients int, body func(client int, emit func(history.Op)) error) ([]history.Op, error) {
	var rec history.Recorder
	var wg sync.WaitGroup
	errs := make([]error, clients)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[c] = body(c, rec.Add)
		}()
	}
	wg.Wait()
	return rec.Ops(), errors.Join(errs...)
}

// OwnershipExercised says what an ownership history lacks to be worth
// checking: successful acquires, refused ones, and let-go handles that
// tried to write. Nil when it has all three.
func OwnershipExercised(ops []history.Op) error {
	count := map[history.Outcome]int{}
	for _, op := range ops {
		if op.Kind == "acquire" || op.Outcome == history.Fenced {
			count[op.Outcome]++
		}
	}
	var missing []error
	for _, o := range []history.Outcome{history.Changed, history.Held, history.Fenced} {
		if count[o] == 0 {
			missing = append(missing, fmt.Errorf("the history has no %s operation", o))
		}
	}
	return errors.Join(missing...)
}

// CreateAll creates every id in its initial state, owned by nobody, and
// returns the revisions it was created at.
func CreateAll(ctx context.Context, store storage.Store, ids []string) (map[string]uint64, error) {
	revs := map[string]uint64{}
	for _, id := range ids {
		p, err := transition.NewPersisted(teraslice.Lifecycle(), store, id, transition.PersistedOptions{})
		if err != nil {
			return nil, err
		}
		rec, err := p.Create(ctx, transition.To(state.Pending))
		if err != nil {
			return nil, err
		}
		revs[id] = rec.Revision
	}
	return revs, nil
}

// IDs returns n ids with prefix.
func IDs(prefix string, n int) []string {
	out := make([]string, n)
	for k := range out {
		out[k] = fmt.Sprintf("%s-%d", prefix, k)
	}
	return out
}
