package transition

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/execfsm/execfsm/internal/metaname"
	"github.com/execfsm/execfsm/storage"
)

// Counters. A table may count moves: every move along an edge given to
// [Builder.Count] adds its time to the record's counter, in the same
// write as the move, whoever makes it (a controller, an outside
// authority, an operator's tool), so nothing that moves the record can
// forget to. Counting is mechanical; what the counts mean (how many
// restarts a job may have, how long to wait before the next) is the
// caller's, or recovery's budgets'. A Machine has no record and counts
// nothing.

// MaxCounterLen bounds a counter's name.
const MaxCounterLen = metaname.MaxLen

// countKeyPrefix starts the record metadata key of every counter.
const countKeyPrefix = "execfsm.count."

// CountKey is the record metadata key under which a record keeps
// counter's count: "execfsm.count." and the counter's name.
func CountKey(counter string) string { return countKeyPrefix + counter }

// CounterOfKey returns the counter whose count key is key (see
// [CountKey]), and false if key is no count key.
func CounterOfKey(key string) (string, bool) {
	counter, ok := strings.CutPrefix(key, countKeyPrefix)
	return counter, ok && checkCounter(counter) == nil
}

// maxCountTimes is how many times a count keeps: a metadata value holds 4
// KB, and the earlier times are counted, not listed.
const maxCountTimes = 100

// Count is what a record counts of a counter: the times of the last moves
// counted (at most 100), oldest first, how many earlier ones were dropped
// to keep the value bounded, and the time of the first move ever counted
// (a job-wide deadline runs from it). Over the record's whole life the
// count is exact; within a window at most the last 100 are told apart.
type Count struct {
	First   time.Time
	Times   []time.Time
	Dropped int
}

// CountOf returns rec's count of counter (the zero Count if it has none).
// A value that is not a count is an error matching
// storage.ErrInvalidRecord.
func CountOf(rec storage.Record, counter string) (Count, error) {
	return ParseCount(rec.Meta[CountKey(counter)])
}

// ParseCount reads a count as it is stored: comma-separated Unix
// milliseconds, oldest first, after "N@F:" when N earlier ones were
// dropped or the first move, at F, is no longer among them.
func ParseCount(value string) (Count, error) {
	var c Count
	if value == "" {
		return c, nil
	}
	bad := func() (Count, error) {
		return Count{}, fmt.Errorf("transition: %w: %.64q is not a count (comma-separated Unix milliseconds)", storage.ErrInvalidRecord, value)
	}
	if head, rest, ok := strings.Cut(value, ":"); ok {
		n, first, ok := strings.Cut(head, "@")
		dropped, err := strconv.Atoi(n)
		if !ok || err != nil || dropped < 0 {
			return bad()
		}
		ms, err := strconv.ParseInt(first, 10, 64)
		if err != nil || ms < 0 {
			return bad()
		}
		c.Dropped, c.First, value = dropped, time.UnixMilli(ms).UTC(), rest
		if value == "" {
			return c, nil
		}
	}
	for field := range strings.SplitSeq(value, ",") {
		ms, err := strconv.ParseInt(field, 10, 64)
		if err != nil || ms < 0 {
			return bad()
		}
		c.Times = append(c.Times, time.UnixMilli(ms).UTC())
	}
	if c.First.IsZero() {
		c.First = c.Times[0]
	}
	return c, nil
}

// Total is how many moves were counted.
func (c Count) Total() int { return c.Dropped + len(c.Times) }

// Since is how many moves were counted after cutoff; the zero cutoff
// counts them all.
func (c Count) Since(cutoff time.Time) int {
	if cutoff.IsZero() {
		return c.Total()
	}
	n := 0
	for _, t := range c.Times {
		if t.After(cutoff) {
			n++
		}
	}
	return n
}

// Last returns the time of the last move counted, and false if none was.
func (c Count) Last() (time.Time, bool) {
	if len(c.Times) == 0 {
		return time.Time{}, false
	}
	return c.Times[len(c.Times)-1], true
}

// Add returns c with one more move counted at t, keeping the last 100
// times and the first.
func (c Count) Add(t time.Time) Count {
	t = t.UTC().Truncate(time.Millisecond)
	c.Times = append(slices.Clone(c.Times), t)
	if c.First.IsZero() {
		c.First = t
	}
	if over := len(c.Times) - maxCountTimes; over > 0 {
		c.Times, c.Dropped = c.Times[over:], c.Dropped+over
	}
	return c
}

// After returns c without the moves at or before cutoff (a window's
// start): what a count limited to a window needs to keep. The first move
// stays known.
func (c Count) After(cutoff time.Time) Count {
	c.Times = slices.DeleteFunc(slices.Clone(c.Times), func(t time.Time) bool { return !t.After(cutoff) })
	c.Dropped = 0
	return c
}

// Text says the count as people read it, nouns ("unexpected restarts")
// counted and each time written by when: "2 unexpected restarts: 09:00,
// 09:05", or "150 unexpected restarts, the last 100: ..." once the earlier
// ones are dropped.
func (c Count) Text(nouns string, when func(time.Time) string) string {
	shown := make([]string, len(c.Times))
	for k, t := range c.Times {
		shown[k] = when(t)
	}
	if c.Dropped > 0 {
		return fmt.Sprintf("%d %s, the last %d: %s", c.Total(), nouns, len(c.Times), strings.Join(shown, ", "))
	}
	return fmt.Sprintf("%d %s: %s", c.Total(), nouns, strings.Join(shown, ", "))
}

// String is the count as it is stored.
func (c Count) String() string {
	parts := make([]string, len(c.Times))
	for k, t := range c.Times {
		parts[k] = strconv.FormatInt(t.UnixMilli(), 10)
	}
	out := strings.Join(parts, ",")
	if c.Dropped > 0 || (!c.First.IsZero() && (len(c.Times) == 0 || !c.First.Equal(c.Times[0]))) {
		out = strconv.Itoa(c.Dropped) + "@" + strconv.FormatInt(c.First.UnixMilli(), 10) + ":" + out
	}
	return out
}

// checkCounter says what is wrong with a counter's name.
func checkCounter(name string) error { return metaname.Check("counter", name) }

// addCounts attaches the counters to their edges.
func (t *Table[S]) addCounts(counts []countDecl[S], p *problems) {
	t.counters = map[int][]string{}
	for _, c := range counts {
		if err := checkCounter(c.counter); err != nil {
			p.add("%v", err)
			continue
		}
		i, ok := t.known(c.from)
		if !ok {
			p.add("count %s on a move from %s, an unknown state", c.counter, nameOf(c.from))
			continue
		}
		if len(c.to) == 0 {
			p.add("count %s from %s names no state to move to", c.counter, t.names[i])
		}
		for _, to := range c.to {
			j, ok := t.known(to)
			switch {
			case !ok:
				p.add("count %s on %s → %s names an unknown state", c.counter, t.names[i], nameOf(to))
			case t.edges[i*t.n+j] == 0:
				p.add("count %s on %s → %s, which is not an allowed edge", c.counter, t.names[i], t.names[j])
			case slices.Contains(t.counters[i*t.n+j], c.counter):
				p.add("count %s on %s → %s given twice", c.counter, t.names[i], t.names[j])
			default:
				t.counters[i*t.n+j] = append(t.counters[i*t.n+j], c.counter)
			}
		}
	}
}

// countMove returns meta with the move of edge i → j, at, added to the
// counters it counts. meta is copied before it is changed unless own says
// it is already the caller's copy.
func (t *Table[S]) countMove(i, j int, meta map[string]string, own bool, at time.Time) map[string]string {
	names := t.counters[i*t.n+j]
	if len(names) == 0 {
		return meta
	}
	if !own || meta == nil {
		meta = maps.Clone(meta)
		if meta == nil {
			meta = make(map[string]string, len(names))
		}
	}
	for _, name := range names {
		c, err := ParseCount(meta[CountKey(name)])
		if err != nil {
			// A count that does not read (an operator's hand edit) starts
			// again rather than keep every later move from being written.
			c = Count{}
		}
		meta[CountKey(name)] = c.Add(at).String()
	}
	return meta
}

// Counters returns the counters the move from → to adds to, in the order
// given ([Builder.Count]); none for a move not counted.
func (t *Table[S]) Counters(from, to S) []string {
	i, ok1 := t.lookup(from)
	j, ok2 := t.lookup(to)
	if !ok1 || !ok2 {
		return nil
	}
	return slices.Clone(t.counters[i*t.n+j])
}

// HasCounter reports whether some move of the table counts counter.
func (t *Table[S]) HasCounter(counter string) bool {
	for _, names := range t.counters {
		if slices.Contains(names, counter) {
			return true
		}
	}
	return false
}
