package fleettest

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// Check explores f within b (see Fleet.Explore) and fails t with the
// violation's timeline and path if an invariant breaks; it logs what the
// exploration covered. A test with a deadline (go test -timeout) that an
// exploration would outlast fails shortly before it, saying how far the
// exploration got, instead of being killed with the rest.
func Check[S comparable](t testing.TB, f Fleet[S], b Bound) Report {
	t.Helper()
	ctx := context.Background()
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if deadline, ok := d.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, deadline.Add(-time.Until(deadline)/20))
			defer cancel()
		}
	}
	r, err := f.Explore(ctx, b)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("fleettest: the exploration did not end before the test's deadline: %s so far", r)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fleettest: %s", r)
	return r
}

// node is a state reached, by the step from its parent.
type node struct {
	parent *node
	step   string
}

func (n *node) path() []string {
	var out []string
	for ; n != nil && n.parent != nil; n = n.parent {
		out = append(out, n.step)
	}
	slices.Reverse(out)
	return out
}

// child is a state one step from a node.
type child struct {
	step  string
	key   uint64
	found *found
}

// Explore runs the fleet through every interleaving of its actors'
// actions within b, breadth first, checking the invariants at every state,
// and returns what it covered. States are told apart by what the fleet's
// future depends on (see the package doc), so a state reached twice is explored
// once. The first broken invariant ends it with a *Violation carrying the
// shortest path that breaks it. ctx ends it early with its error.
//
// Each state is reached by replaying its path from the start on a new
// memory store: the library's decisions are deterministic given the
// explorer's clock, so nothing needs copying. Levels are explored on every
// CPU (runtime.GOMAXPROCS).
func (f Fleet[S]) Explore(ctx context.Context, b Bound) (Report, error) {
	s, err := f.validate(b)
	if err != nil {
		return Report{}, err
	}
	seed := maphash.MakeSeed()
	root := &node{}
	w, err := s.replay(ctx, nil, false)
	if err != nil {
		return Report{}, err
	}
	if w.found != nil {
		return Report{States: 1}, s.violation(ctx, w.found, nil, 0, Report{States: 1})
	}
	seen := map[uint64]bool{w.key(seed): true}
	report := Report{States: 1}
	frontier := []*node{root}
	for depth := 1; depth <= b.Depth && len(frontier) > 0; depth++ {
		children := make([][]child, len(frontier))
		errs := make([]error, len(frontier))
		var wg sync.WaitGroup
		next := make(chan int)
		for range runtime.GOMAXPROCS(0) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					children[i], errs[i] = s.expand(ctx, frontier[i].path(), seed)
				}
			}()
		}
	feed:
		for i := range frontier {
			select {
			case next <- i:
			case <-ctx.Done():
				break feed
			}
		}
		close(next)
		wg.Wait()
		if err := ctx.Err(); err != nil {
			return report, err
		}
		var level []*node
		report.Depth = depth
		for i, cs := range children {
			if errs[i] != nil {
				return report, errs[i]
			}
			for _, c := range cs {
				report.Steps++
				n := &node{parent: frontier[i], step: c.step}
				if c.found != nil {
					return report, s.violation(ctx, c.found, n.path(), 0, report)
				}
				if !seen[c.key] {
					seen[c.key] = true
					report.States++
					level = append(level, n)
				}
			}
		}
		frontier = level
	}
	report.Exhausted = len(frontier) == 0
	return report, nil
}

// expand returns the states one step from the one path reaches: each
// action, and each action with each race its writes can have.
func (s *settings[S]) expand(ctx context.Context, path []string, seed maphash.Seed) ([]child, error) {
	w, err := s.replay(ctx, path, true)
	if err != nil {
		return nil, err
	}
	var labels []string
	for _, a := range w.actions() {
		labels = append(labels, a.label)
	}
	var out []child
	// The world the actions were listed on takes the first step; each
	// other step needs the state replayed afresh.
	unused := w
	try := func(step string, record bool) ([]race, error) {
		w := unused
		unused = nil
		if w == nil {
			var err error
			if w, err = s.replay(ctx, path, true); err != nil {
				return nil, err
			}
		}
		w.quiet, w.recording = false, record
		if err := w.step(step); err != nil {
			return nil, err
		}
		w.check()
		out = append(out, child{step: step, key: w.key(seed), found: w.found})
		return slices.Clone(w.options), nil
	}
	// Every action first, then the races: of two interleavings as short,
	// the one without a race is reported.
	var raced []string
	for _, label := range labels {
		races, err := try(label, !s.bound.NoRaces)
		if err != nil {
			return nil, err
		}
		for _, r := range races {
			raced = append(raced, fmt.Sprintf("%s [race@%d: %s]", label, r.write, r.label))
		}
	}
	for _, step := range raced {
		if _, err := try(step, false); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// replay runs path from the start on a new world.
func (s *settings[S]) replay(ctx context.Context, path []string, quiet bool) (*world[S], error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w, err := newWorld(ctx, s, quiet)
	if err != nil {
		return nil, err
	}
	w.check()
	for _, step := range path {
		if err := w.step(step); err != nil {
			return nil, err
		}
		w.check()
		if w.found != nil {
			return w, nil
		}
	}
	return w, nil
}

// violation builds the error for f found on path, replaying it for its
// timeline.
func (s *settings[S]) violation(ctx context.Context, f *found, path []string, seed uint64, r Report) error {
	w, err := s.replay(ctx, path, false)
	if err != nil {
		return err
	}
	if w.found != nil {
		f = w.found
	}
	return &Violation{Invariant: f.invariant, Problem: f.problem, Path: path, Timeline: w.lines, Seed: seed, Report: r}
}

// Replay runs path (a Violation's Path) from the start within b (the
// bound it was found in: what may happen next depends on it) and returns
// the violation it leads to, if any; an error matching ErrInvalidPath
// says that a step is not one the fleet can take where it stands.
func (f Fleet[S]) Replay(ctx context.Context, b Bound, path []string) error {
	b.Depth = max(1, len(path))
	s, err := f.validate(b)
	if err != nil {
		return err
	}
	w, err := s.replay(ctx, path, false)
	if err != nil {
		return err
	}
	if w.found != nil {
		return &Violation{Invariant: w.found.invariant, Problem: w.found.problem, Path: path, Timeline: w.lines}
	}
	return nil
}

// RandomWalks takes walks random walks of up to depth steps each through the
// fleet, choosing each action (and each race, unless b.NoRaces) with a
// generator seeded with seed, so the same seed takes the same walks. It
// goes deeper than Explore can, checking the same invariants; b's Pods,
// Crashes and Drains bound each walk (its Depth is not used). A violation
// found is shortened step by step while it still breaks the same
// invariant, and carries the seed.
func (f Fleet[S]) RandomWalks(ctx context.Context, b Bound, seed uint64, walks, depth int) (Report, error) {
	b.Depth = max(depth, 1)
	s, err := f.validate(b)
	if err != nil {
		return Report{}, err
	}
	if walks <= 0 || depth <= 0 {
		return Report{}, fmt.Errorf("fleettest: %w: %d walks of depth %d", ErrInvalidFleet, walks, depth)
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	hashSeed := maphash.MakeSeed()
	seen := map[uint64]bool{}
	var report Report
	for range walks {
		if err := ctx.Err(); err != nil {
			return report, err
		}
		report.Walks++
		w, err := newWorld(ctx, s, false)
		if err != nil {
			return report, err
		}
		w.random = rng
		var path []string
		for range depth {
			acts := w.actions()
			if len(acts) == 0 {
				break
			}
			a := acts[rng.IntN(len(acts))]
			w.begin()
			w.do(a)
			w.check()
			report.Steps++
			path = append(path, a.label+w.raced)
			if k := w.key(hashSeed); !seen[k] {
				seen[k] = true
				report.States++
			}
			if w.found != nil {
				return report, s.violation(ctx, w.found, s.shorten(ctx, path, w.found.invariant), seed, report)
			}
		}
	}
	return report, nil
}

// shorten drops steps from path one at a time while what is left still
// breaks invariant.
func (s *settings[S]) shorten(ctx context.Context, path []string, invariant string) []string {
	for shorter := true; shorter; {
		shorter = false
		for i := range path {
			try := slices.Delete(slices.Clone(path), i, i+1)
			w, err := s.replay(ctx, try, false)
			if err == nil && w.found != nil && w.found.invariant == invariant {
				path, shorter = try, true
				break
			}
		}
	}
	return path
}
