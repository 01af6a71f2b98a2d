// Package fleettest explores every interleaving of a small fleet running an
// execution lifecycle, and checks at every state the invariants a fleet
// must keep. It checks the library's code, not a model of it: the
// controllers run recovery.Decider's Start, Terminate, End and Abandon,
// the cluster master writes through transition.Persisted, the Reaper is
// recovery's, all against a storage.Memory under a clock the explorer
// moves. Where transitiontest checks a table, fleettest checks what a
// table's roles make a fleet do.
//
// # What runs
//
// One execution, created in the table's initial state, and its actors:
//
//   - The controller pods of its Job, made one at a time by the platform
//     (at most Bound.Pods): each starts (Decider.Start), moves an execution
//     it started to its first running state, then finishes its work (the
//     roles' Ends with End, each of Fleet.Ends with EndAs), fails
//     it, notices a stop and ends it, or retries its start as a live
//     holder would after a timeout. With Policy.Manager they are a
//     manager's pods under a Deployment, which replaces any that exits: a
//     manager keeps a parked execution it holds, sets it up again when an
//     authority moves it to a not-started state, and makes what falls
//     due (Decider.Advance); its SIGTERM hands the execution over.
//   - The platform: a SIGTERM (a drain; Decider.Terminate, then the
//     shutdown's End), a SIGKILL (an OOM kill), a lost node (the pod
//     lives on out of reach, and may come back), a replacement pod when
//     the last one died or exited non-zero; a pod exiting 0 completes
//     the Job, which makes no more.
//   - The cluster master: a stop, the moves of Master.Moves (pause and
//     resume; never after its stop), Decider.Abandon when the Job gave up (Master.Abandons), a
//     rerun of an ended execution into a new one with its own pods
//     (Master.Reruns).
//   - The Reaper, reconciling the execution.
//   - Time: a dead or cut-off pod's lease expires (its ownership is
//     released: to a successor a released ownership and an expired one
//     look the same), and the clock moves just past the next moment
//     something falls due (a status's deadline, an abandoned execution's,
//     a restart leaving its window).
//   - Races: before each write of a step, any action of another actor
//     may land first, so the writer's compare-and-swap meets a changed
//     record and decides again (Bound.NoRaces turns this off).
//
// # How it searches
//
// Explore goes breadth first, one step at a time, replaying each state's
// path from the start on a new store (the decisions are deterministic
// given the clock). A state is told apart by what the fleet's future
// depends on (the records' statuses, owners, metadata and times, each
// pod's phase and hold, what the explorer counts); one reached twice is
// explored once, so the search is exhaustive within the bound, and with a
// depth to spare it ends when a level adds nothing new (Report.Exhausted).
// The first broken invariant ends it with a *Violation: the shortest path
// that breaks it (an interleaving without races before one with, of the
// same length), as steps Replay takes back and as a timeline:
//
//	+0s      platform   starts pod-1 for ex-1
//	+0s      pod-1@1    pending        (owner)      controller started for pending execution
//	+0s      pod-1@1    initializing → running      set up; running
//	+0s      platform   sends SIGTERM to pod-1
//	+0s      pod-1@1    running      → terminated   shut down before the work could finish
//
// [Fleet.RandomWalks] takes seeded random walks instead, deeper than an exhaustive search
// can go, and shortens what it finds.
//
// # Invariants
//
// The built-in ones, by the names a Violation carries: OneOwnerWrites,
// NoCrashLoop, RestartsAreCrashes, StopNeverLost, DrainRelocates,
// NothingStranded, JobEndsWithExecution, AuditTrail, ExpectedErrors
// (see their constants).
// Fleet.Invariants adds your own, as functions of the records.
//
// # Bounds
//
// DefaultBound (two pods, a crash, a drain, races, twelve steps) runs in
// seconds. Without the depth bound, the execution lifecycle's whole
// reachable space with two pods, a crash and a drain is 8,506 states,
// all reached by depth 19 (BENCHMARKS.md, the run of record). Each
// further pod, crash or drain multiplies the states; BENCHMARKS.md gives
// counts and times.
package fleettest
