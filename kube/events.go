package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"unicode"

	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/transition"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultEventQueue is how many moves Events holds waiting to be posted
// when EventsOptions.Queue is zero.
const DefaultEventQueue = 256

// maxEventMessage bounds an Event's message: the API server refuses
// longer ones from events.k8s.io clients, and kubectl shows one line.
const maxEventMessage = 1024

// EventsOptions configure [NewEvents].
type EventsOptions struct {
	// Component names who posts the Events (their source): the master's
	// name, a controller's pod name. Required.
	Component string
	// Queue is how many moves may wait to be posted; when it is full a
	// move's Event is dropped (and counted, and told to OnError) rather
	// than slowing down the writes. Zero is DefaultEventQueue.
	Queue int
	// OnError is told of each Event that could not be posted or was
	// dropped: Events never fail a write. Nil logs each at Warn through
	// slog.Default().
	OnError func(error)
}

// Events posts a Kubernetes Event on an execution's ConfigMap for every
// move a Persisted makes of it (not for writes that keep the status), so
// operators see an execution's life where they look:
// `kubectl describe cm execfsm-ex-42`, `kubectl get events`. Give
// [Events.Observers] to the Persisted handles of the master and the
// controllers. The Event's reason is the state moved to (Relocating,
// Failed), its message the move, its reason and who made it; a move to
// the roles' Failed state is a Warning, every other Normal.
//
// Events are posted in the background, in the order of the moves, each
// with one read of the record's ConfigMap (an Event names the object's
// uid, which kubectl describe matches) and one create: a part that posts
// them needs create on events beside its Role. Writes never wait for
// them and never fail because of them.
type Events[S comparable] struct {
	store     *Store
	roles     *recovery.Roles[S]
	component string
	onError   func(error)
	queue     chan transition.Change[S]
	stop      context.CancelFunc
	done      chan struct{}
}

// NewEvents starts posting the Events of the executions in store, whose
// table roles gives its roles; Close stops it.
func NewEvents[S comparable](store *Store, roles *recovery.Roles[S], opts EventsOptions) (*Events[S], error) {
	switch {
	case store == nil || store.client == nil:
		return nil, errors.New("kube: NewEvents: nil store (make one with New)")
	case roles == nil:
		return nil, errors.New("kube: NewEvents: nil roles")
	case opts.Component == "":
		return nil, errors.New("kube: NewEvents: EventsOptions.Component names who posts the Events; it is required")
	case opts.Queue < 0:
		return nil, fmt.Errorf("kube: NewEvents: negative Queue %d", opts.Queue)
	}
	if opts.Queue == 0 {
		opts.Queue = DefaultEventQueue
	}
	ctx, stop := context.WithCancel(context.Background())
	e := &Events[S]{store: store, roles: roles, component: opts.Component, onError: opts.OnError,
		queue: make(chan transition.Change[S], opts.Queue), stop: stop, done: make(chan struct{})}
	go e.post(ctx)
	return e, nil
}

// Observers returns the observers to give a Persisted (the master's and
// the controllers'): each move it makes is posted as an Event.
func (e *Events[S]) Observers() transition.Observers[S] {
	return transition.Observers[S]{OnChange: []func(transition.Change[S]){e.moved}}
}

// moved queues c's Event, or drops it if the queue is full or Events is
// closed.
func (e *Events[S]) moved(c transition.Change[S]) {
	if !c.Changed() {
		return // a write that keeps the status: no move to tell
	}
	select {
	case <-e.done:
		return
	default:
	}
	select {
	case e.queue <- c:
	default:
		e.fail(fmt.Errorf("kube: Event of %s's move to %v dropped: %d moves already wait to be posted", c.ID, c.To, cap(e.queue)))
	}
}

// post posts the queued Events until ctx is done, then what is queued.
func (e *Events[S]) post(ctx context.Context) {
	defer close(e.done)
	for {
		select {
		case c := <-e.queue:
			e.postOne(context.Background(), c)
		case <-ctx.Done():
			for {
				select {
				case c := <-e.queue:
					e.postOne(context.Background(), c)
				default:
					return
				}
			}
		}
	}
}

// postOne posts c's Event on its record's ConfigMap.
func (e *Events[S]) postOne(ctx context.Context, c transition.Change[S]) {
	ctx, cancel, err := e.store.call(ctx, "Event")
	if err != nil {
		e.fail(err)
		return
	}
	defer cancel()
	obj, _, err := e.store.records.get(ctx, c.ID)
	if err != nil {
		e.fail(fmt.Errorf("kube: Event of %s's move: %w", c.ID, err))
		return
	}
	table := e.roles.Table()
	from, _ := table.Name(c.From)
	to, _ := table.Name(c.To)
	var zero S
	if c.From == zero && !table.Has(zero) {
		from = "" // a creation: observers see it as a move from the zero value
	}
	kind := corev1.EventTypeNormal
	if c.To == e.roles.Failed() {
		kind = corev1.EventTypeWarning
	}
	message := fmt.Sprintf("%s → %s: %s (by %s)", from, to, c.Reason, c.Actor)
	if from == "" {
		message = fmt.Sprintf("created in %s: %s (by %s)", to, c.Reason, c.Actor)
	}
	if len(message) > maxEventMessage {
		message = strings.ToValidUTF8(message[:maxEventMessage-3], "") + "..."
	}
	at := metav1.NewTime(c.At)
	event := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: obj.ref.Name + ".", Namespace: obj.ref.Namespace},
		InvolvedObject: obj.ref,
		Reason:         eventReason(to), Message: message, Type: kind,
		Source:         corev1.EventSource{Component: e.component},
		FirstTimestamp: at, LastTimestamp: at, Count: 1,
	}
	if _, err := e.store.client.CoreV1().Events(obj.ref.Namespace).Create(ctx, event, metav1.CreateOptions{}); err != nil {
		e.fail(fmt.Errorf("kube: Event of %s's move to %s: %w", c.ID, to, err))
	}
}

// eventReason makes a state's name an Event reason, UpperCamelCase as
// Kubernetes' own: relocating is Relocating, shutting-down ShuttingDown.
func eventReason(state string) string {
	var b strings.Builder
	upper := true
	for _, r := range state {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			upper = true
			continue
		}
		if upper {
			r = unicode.ToUpper(r)
			upper = false
		}
		b.WriteRune(r)
	}
	if b.Len() == 0 {
		return "Moved"
	}
	return b.String()
}

func (e *Events[S]) fail(err error) {
	if e.onError != nil {
		e.onError(err)
		return
	}
	slog.Default().Warn("kube: an Event was not posted", "err", err)
}

// Close posts the Events still queued and stops; moves made after it are
// not posted. It waits for the posting to end, each Event bounded by the
// store's timeout.
func (e *Events[S]) Close() {
	e.stop()
	<-e.done // closed once posting ended: a second Close returns at once
}
