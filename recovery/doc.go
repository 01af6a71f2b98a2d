// Package recovery holds the decisions an execution controller makes when
// it starts and when it is told to terminate, the deadlines of statuses
// that must not last, and the reaper that enforces them. The loop that
// runs a reconciler (the reaper, or a controller's own) is package
// reconcile.
//
// # Roles
//
// The decisions work for any table whose states are given [Roles]: which
// states are not started, which run, the return state a relocation writes
// (it remembers the state it left), the stopping state, and what a
// failure and a finished stop write; the table's terminal states are
// terminal. Roles are checked against the table when they are built
// ([DefineRoles]): a state without a role, a running state that cannot
// fail or relocate, a relocating state without return edges is an error
// then, not a wrong decision later. state.Roles() are the execution
// lifecycle's; a VILLAS simulator manager defines its own.
//
// # Decisions
//
// [Startup] and [Terminate] are pure functions of a stored record, the
// roles and a [Policy], in the manner of etcd's raft: no I/O, trivially
// table-tested.
// [ApplyStartup] and [ApplyTerminate] are the thin layer that reads the
// record and writes the outcome through a [transition.Persisted] with
// compare-and-swap, deciding again if the record changed in between.
//
// What each stored status of the execution lifecycle (state.Roles())
// means for each event, for a controller on a platform that restarts
// controllers, running restartable work (a relocating record remembering
// that it left paused):
//
//	stored status  start             SIGTERM                stop requested  crash, budget spent
//	pending        start             shutdown               → stopping      start
//	scheduling     start             shutdown               → stopping      start
//	initializing   start             shutdown               → stopping      start
//	running        resume            relocate → relocating  → stopping      fail → failed
//	recovering     resume            relocate → relocating  → stopping      fail → failed
//	relocating     resume → paused   relocate               → stopping      resume → paused
//	failing        resume            relocate → relocating  → stopping      fail → failed
//	paused         resume            relocate → relocating  → stopping      fail → failed
//	stopping       stop              shutdown               no-op           stop
//	completed      refuse            shutdown               refused         refuse
//	stopped        refuse            shutdown               refused         refuse
//	rejected       refuse            shutdown               refused         refuse
//	failed         refuse            shutdown               refused         refuse
//	terminated     refuse            shutdown               refused         refuse
//
// "start" is [Startup] within the restart budget; "crash, budget spent"
// is [Startup] after the controller died in that status (an OOM kill:
// nothing is written, the status stays) once more than the budget of
// unexpected restarts happened within the window. A crash loop is
// impossible by construction: the restart that exceeds the budget fails
// the execution. Where the work is not restartable or the platform does
// not restart controllers, every "resume" after a crash is "fail" and
// every "relocate" is "shutdown". "stop requested" is the cluster master
// writing stopping. The package's tests enumerate this table from the
// functions themselves and fail if this copy disagrees.
//
// # Deadlines
//
// Some statuses must not last: relocating that nobody takes over, stopping
// past the shutdown timeout. [Deadlines] say for how long and what comes
// next; [Startup] honours them (a stale relocating record is failed, not
// resumed, or relocating would become the new "stuck in running"), and
// [Reaper] is the reconciler that enforces them while nobody starts.
package recovery
