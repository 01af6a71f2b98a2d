// Package looplabfsm brings programs built on github.com/looplab/fsm to
// execfsm: their machine definitions checked as tables, and their
// machines persisted, surviving a crash and shared between instances.
//
// [Table] turns a looplab/fsm definition (its events and initial state)
// into a validated [transition.Table]: Build's checks find the states no
// event reaches and the traps, Mermaid and DOT draw it, transitiontest
// property-tests it.
//
// [New] returns an [FSM] from the definition alone (its initial state
// and events, given once), a store and an id; [Open] does the same from a
// transition.Persisted built with options of its own. An FSM is a
// looplab/fsm machine, at the state a store
// holds, whose every transition is written first, by compare-and-swap
// with its audit entry, under the ownership the process took. An event
// whose write fails is cancelled, so the machine never runs ahead of the
// store; a restarted process calls Open again and gets its machine back
// where it was. The package example persists a door's machine and opens
// it again in a second process.
//
// # Callbacks
//
// looplab/fsm calls before_<EVENT>, before_event, leave_<STATE>,
// leave_state, then moves, then enter_<STATE>, enter_state, after_<EVENT>,
// after_event. The FSM keeps that order and writes between leave_state
// and the move. A before_ or leave_ callback that cancels the event, or
// a context given to [FSM.Event] that is cancelled before then, writes
// nothing; once the move is written it is made (the FSM gives
// looplab/fsm a context it cannot cancel after the write), and enter_
// and after_ callbacks run only once the store has the move. Every
// callback's context ends when the one given to Event does, as in
// looplab/fsm, so a callback that waits on it returns when the caller
// gives up. An
// asynchronous transition is written by [FSM.Transition] when it
// completes, and not at all if it was cancelled (CancelTransition).
//
// # What is not persisted
//
// Only the state is: looplab/fsm's metadata (SetMetadata) lives in the
// process, as in looplab/fsm; keep what must survive a restart in the
// record's metadata through the Persisted ([FSM.Persisted]). An event
// whose source is its destination moves nothing, so [Table] has no edge
// for it and the table's Mermaid and DOT leave it out; looplab/fsm's own
// Visualize draws it.
//
// looplab/fsm holds its event lock through the before_ and leave_
// callbacks: firing an event from one of them deadlocks in looplab/fsm.
// [FSM.Event] recognises the context those callbacks are given and
// returns [ErrReentrant] instead; e.FSM.Event (looplab/fsm's own) still
// deadlocks. From enter_ and after_ callbacks both work, and the event
// fired there is written after the one that fired it.
//
// # Where it lives
//
// The package is its own module, github.com/execfsm/execfsm/looplabfsm,
// so the core module does not require looplab/fsm of programs that do
// not use it.
package looplabfsm
