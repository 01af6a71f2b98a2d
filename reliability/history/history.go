// Package history records what concurrent clients did to executions, with
// when each call started and returned, and checks the record with
// porcupine (github.com/anishathalye/porcupine) against a model: the way
// etcd's robustness tests check their key-value store.
//
// Three models are offered. FireModel is one execution per id moving
// along a transition table, as Persisted.Fire promises: a move happens at
// one instant between call and return, only if the table allows it from
// the state it happens in (return edges included), and a refusal means
// the table did forbid it at some instant in the interval. CASModel is a
// compare-and-swap register per id, as storage.Store promises.
// OwnershipModel adds owners to FireModel: an acquire succeeds only when
// nobody holds the execution, at exactly the next epoch; a move under a
// claim happens only while that claim holds, and is fenced otherwise.
//
// A history that fails the check is written as porcupine's HTML
// visualization, so a failure can be looked at, not just reported.
package history

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/execfsm/execfsm/transition"
)

// Outcome is what a Fire call returned.
type Outcome string

// The Fire outcomes.
const (
	Changed Outcome = "changed" // the move was made; From says from where
	Noop    Outcome = "noop"    // the target was the current state
	Refused Outcome = "refused" // the table (not a guard) refused it
	// NoEffect: the call gave up without writing (ErrConflict after its
	// retries, a fenced writer, a done context before the write).
	NoEffect Outcome = "no-effect"
	// Unknown: the call failed in a way that does not say whether the
	// write landed (a timeout while etcd committed it, say).
	Unknown Outcome = "unknown"
	// Fenced: a move under a claim was refused because the claim is not
	// the record's (any more), or its ownership has ended.
	Fenced Outcome = "fenced"
	// Held: an acquire was refused because a live holder owns the record.
	Held Outcome = "held"
)

// Op is one recorded call, in a form that crosses process boundaries as
// JSON (child processes print theirs).
type Op struct {
	Client int    `json:"client"`
	ID     string `json:"id"`
	Kind   string `json:"kind"` // "fire", "get", "cas", "acquire" or "release"
	// fire
	To      string  `json:"to,omitempty"`
	Outcome Outcome `json:"outcome,omitempty"`
	From    string  `json:"from,omitempty"`
	// fire under a claim, acquire and release: the claim (for an
	// acquire, the epoch it took the record at)
	Holder string `json:"holder,omitempty"`
	Epoch  uint64 `json:"epoch,omitempty"`
	// get and cas: the record's revision and status
	Expect   uint64 `json:"expect,omitempty"`
	Status   string `json:"status,omitempty"`
	Revision uint64 `json:"revision,omitempty"`
	Conflict bool   `json:"conflict,omitempty"`
	Failed   bool   `json:"failed,omitempty"` // unknown outcome
	Call     int64  `json:"call"`
	Return   int64  `json:"return"`
}

// Recorder collects operations from many goroutines. The zero value is
// ready to use.
type Recorder struct {
	mu  sync.Mutex
	ops []Op
}

// Now is the clock every recorded process uses: wall-clock nanoseconds,
// which all processes on one machine share.
func Now() int64 { return time.Now().UnixNano() }

// Add records op.
func (r *Recorder) Add(op Op) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// Ops returns the operations recorded so far.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}

// Classify turns Fire's result into an outcome.
func Classify[S comparable](c transition.Change[S], err error, refused, noEffect func(error) bool) (Outcome, S) {
	switch {
	case err == nil && c.Changed():
		return Changed, c.From
	case err == nil:
		return Noop, c.From
	case refused(err):
		return Refused, c.From
	case noEffect(err):
		return NoEffect, c.From
	}
	return Unknown, c.From
}

func partition(ops []porcupine.Operation) [][]porcupine.Operation {
	byID := map[string][]porcupine.Operation{}
	var ids []string
	for _, op := range ops {
		id := op.Input.(Op).ID
		if _, ok := byID[id]; !ok {
			ids = append(ids, id)
		}
		byID[id] = append(byID[id], op)
	}
	sort.Strings(ids)
	out := make([][]porcupine.Operation, 0, len(ids))
	for _, id := range ids {
		out = append(out, byID[id])
	}
	return out
}

type fireState struct{ cur, prev string }

// FireModel is one execution per id on table, created in its initial
// state (with no memory of an earlier one).
func FireModel[S comparable](table *transition.Table[S]) porcupine.Model {
	initial, _ := table.Name(table.Initial())
	legal := func(s fireState, to string) bool {
		from, err1 := table.Parse(s.cur)
		target, err2 := table.Parse(to)
		if err1 != nil || err2 != nil || !table.Allowed(from, target) {
			return false
		}
		return !table.IsReturn(from, target) || s.prev == to
	}
	nm := porcupine.NondeterministicModel{
		Partition: partition,
		Init:      func() []any { return []any{fireState{cur: initial}} },
		Step: func(state, input, _ any) []any {
			s, op := state.(fireState), input.(Op)
			switch op.Outcome {
			case Changed:
				if op.To != s.cur && op.From == s.cur && legal(s, op.To) {
					return []any{fireState{cur: op.To, prev: s.cur}}
				}
			case Noop:
				if op.To == s.cur {
					return []any{s}
				}
			case Refused:
				if op.To != s.cur && !legal(s, op.To) {
					return []any{s}
				}
			case NoEffect:
				return []any{s}
			case Unknown:
				if op.To != s.cur && legal(s, op.To) {
					return []any{s, fireState{cur: op.To, prev: s.cur}}
				}
				return []any{s}
			}
			return nil
		},
		Equal: func(a, b any) bool { return a.(fireState) == b.(fireState) },
		DescribeOperation: func(input, _ any) string {
			op := input.(Op)
			if op.Outcome == Changed {
				return fmt.Sprintf("c%d fire %s: %s → %s", op.Client, op.ID, op.From, op.To)
			}
			return fmt.Sprintf("c%d fire %s → %s: %s", op.Client, op.ID, op.To, op.Outcome)
		},
		DescribeState: func(state any) string {
			s := state.(fireState)
			return fmt.Sprintf("%s (from %s)", s.cur, s.prev)
		},
	}
	return nm.ToModel()
}

type casState struct {
	rev    uint64
	status string
}

// CAS calls must all be answered: the CAS model has no way to know at
// which revision an unanswered write would have landed, so a history
// holding one fails the check. Fire histories may hold unknown outcomes.

// CASModel is a compare-and-swap register per id holding a record's
// revision and status; every id is created before the history starts, in
// status initial at revision created[id].
func CASModel(created map[string]uint64, initial string) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: partition,
		// The partition's first operation names the id, but Init cannot
		// see it; the state starts unknown and the first step fixes it.
		Init: func() []any { return []any{casState{}} },
		Step: func(state, input, _ any) []any {
			s, op := state.(casState), input.(Op)
			if s.rev == 0 {
				s = casState{rev: created[op.ID], status: initial}
			}
			switch {
			case op.Kind == "get":
				if op.Revision == s.rev && op.Status == s.status {
					return []any{s}
				}
			case op.Failed:
				return nil
			case op.Conflict:
				if op.Expect != s.rev && op.Revision == s.rev {
					return []any{s}
				}
			default:
				if op.Expect == s.rev && op.Revision > s.rev {
					return []any{casState{rev: op.Revision, status: op.Status}}
				}
			}
			return nil
		},
		Equal: func(a, b any) bool { return a.(casState) == b.(casState) },
		DescribeOperation: func(input, _ any) string {
			op := input.(Op)
			switch {
			case op.Kind == "get":
				return fmt.Sprintf("c%d get %s = %s@%d", op.Client, op.ID, op.Status, op.Revision)
			case op.Conflict:
				return fmt.Sprintf("c%d cas %s@%d: conflict, current %d", op.Client, op.ID, op.Expect, op.Revision)
			}
			return fmt.Sprintf("c%d cas %s@%d → %s@%d", op.Client, op.ID, op.Expect, op.Status, op.Revision)
		},
		DescribeState: func(state any) string {
			s := state.(casState)
			return fmt.Sprintf("%s@%d", s.status, s.rev)
		},
	}
	return nm.ToModel()
}

type ownState struct {
	cur, prev string
	epoch     uint64
	holder    string // "" while nobody holds it
}

// OwnershipModel is one execution per id on table, created in its
// initial state owned by nobody at epoch 0, moved by outside authorities
// (no Holder) and by owners (Holder and Epoch of their claim), and taken
// over and let go by acquires and releases.
func OwnershipModel[S comparable](table *transition.Table[S]) porcupine.Model {
	initial, _ := table.Name(table.Initial())
	legal := func(s ownState, to string) bool {
		from, err1 := table.Parse(s.cur)
		target, err2 := table.Parse(to)
		if err1 != nil || err2 != nil || !table.Allowed(from, target) {
			return false
		}
		return !table.IsReturn(from, target) || s.prev == to
	}
	moved := func(s ownState, to string) ownState { s.prev, s.cur = s.cur, to; return s }
	nm := porcupine.NondeterministicModel{
		Partition: partition,
		Init:      func() []any { return []any{ownState{cur: initial}} },
		Step: func(state, input, _ any) []any {
			s, op := state.(ownState), input.(Op)
			switch op.Kind {
			case "acquire":
				taken := s
				taken.holder, taken.epoch = op.Holder, s.epoch+1
				switch op.Outcome {
				case Changed:
					// The contract asks for an epoch above every earlier
					// one, not the very next: a store may spend one on
					// an attempt that did not complete (a kube Lease taken
					// over a record that moved).
					if s.holder == "" && op.Epoch > s.epoch {
						taken.epoch = op.Epoch
						return []any{taken}
					}
				case Held:
					if s.holder != "" {
						return []any{s}
					}
				case Unknown:
					if s.holder == "" {
						return []any{s, taken}
					}
					return []any{s}
				}
				return nil
			case "release":
				freed := s
				if s.holder == op.Holder && s.epoch == op.Epoch {
					freed.holder = ""
				}
				if op.Outcome == Unknown {
					return []any{s, freed}
				}
				return []any{freed}
			}
			claimOK := op.Holder == "" || (s.holder == op.Holder && s.epoch == op.Epoch)
			switch op.Outcome {
			case Changed:
				if claimOK && op.To != s.cur && op.From == s.cur && legal(s, op.To) {
					return []any{moved(s, op.To)}
				}
			case Noop:
				if claimOK && op.To == s.cur {
					return []any{s}
				}
			case Refused:
				if claimOK && op.To != s.cur && !legal(s, op.To) {
					return []any{s}
				}
			case Fenced:
				if !claimOK {
					return []any{s}
				}
			case NoEffect:
				return []any{s}
			case Unknown:
				if claimOK && op.To != s.cur && legal(s, op.To) {
					return []any{s, moved(s, op.To)}
				}
				return []any{s}
			}
			return nil
		},
		Equal: func(a, b any) bool { return a.(ownState) == b.(ownState) },
		DescribeOperation: func(input, _ any) string {
			op := input.(Op)
			who := fmt.Sprintf("c%d", op.Client)
			if op.Holder != "" && op.Kind == "fire" {
				who = fmt.Sprintf("c%d@%d", op.Client, op.Epoch)
			}
			switch {
			case op.Kind == "acquire":
				return fmt.Sprintf("%s acquire %s: %s@%d", who, op.ID, op.Outcome, op.Epoch)
			case op.Kind == "release":
				return fmt.Sprintf("%s release %s@%d", who, op.ID, op.Epoch)
			case op.Outcome == Changed:
				return fmt.Sprintf("%s fire %s: %s → %s", who, op.ID, op.From, op.To)
			}
			return fmt.Sprintf("%s fire %s → %s: %s", who, op.ID, op.To, op.Outcome)
		},
		DescribeState: func(state any) string {
			s := state.(ownState)
			holder := s.holder
			if holder == "" {
				holder = "nobody"
			}
			return fmt.Sprintf("%s (from %s), held by %s, epoch %d", s.cur, s.prev, holder, s.epoch)
		},
	}
	return nm.ToModel()
}

// Check checks ops against model. On a violation (or a checker timeout)
// it writes the visualization to dir and returns an error naming it.
func Check(model porcupine.Model, ops []Op, dir, name string, timeout time.Duration) error {
	history := make([]porcupine.Operation, len(ops))
	for k, op := range ops {
		ret := op.Return
		if op.Outcome == Unknown {
			// A write we got no answer for may still land after we gave
			// up on it (etcd commits what it accepted): its effect may
			// fall anywhere after the call.
			ret = math.MaxInt64
		}
		history[k] = porcupine.Operation{ClientId: op.Client, Input: op, Call: op.Call, Output: op, Return: ret}
	}
	result, info := porcupine.CheckOperationsVerbose(model, history, timeout)
	if result == porcupine.Ok {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("history is %s; and writing the visualization failed: %w", result, err)
	}
	path := filepath.Join(dir, name+".html")
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		return fmt.Errorf("history is %s; and writing the visualization failed: %w", result, err)
	}
	raw, _ := json.Marshal(ops)
	_ = os.WriteFile(filepath.Join(dir, name+".json"), raw, 0o644)
	return fmt.Errorf("history of %d operations is %s: see %s", len(ops), result, path)
}
