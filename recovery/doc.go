// Package recovery holds the decisions an execution controller makes when
// it starts, when it is told to terminate and when its work ends, the
// budgets and timers that move an execution on without anyone asking,
// and the reaper that enforces them. The loop that
// runs a reconciler (the reaper, or a controller's own) is package
// reconcile.
//
// # Roles
//
// The decisions work for any table whose states are given [Roles]: which
// states are not started, which run, which are parked (a suspended job:
// nothing starts it but an outside authority's resume), the return
// states a relocation writes (each remembers the state it left), the
// drains (several, each with its own end: Volcano's Aborting, Terminating
// and Completing), the finishing states (the work is over, its end not
// yet written), and what a failure writes; the table's terminal states
// are terminal. Roles are checked against the table when they are built
// ([DefineRoles]): a state without a role, a running state that cannot
// fail or relocate, a relocating state without return edges is an error
// then, not a wrong decision later. teraslice.Roles() are the execution
// lifecycle's; a VILLAS simulator manager defines its own.
//
// # Decisions
//
// [Startup] and [Terminate] are pure functions of a stored record, the
// roles and a [Policy], in the manner of etcd's raft: no I/O, trivially
// table-tested.
// [Decider.Start] and [Decider.Terminate] are the thin layer that reads the
// record and writes the outcome through a [transition.Persisted] with
// compare-and-swap, deciding again if the record changed in between.
// A start is one write: the take-over and the verdict land together, or
// nothing does; a start retried by the controller that made it counts
// nothing, and a controller that lost its ownership while it lived takes
// the execution back, counting nothing, if nobody else took it.
//
// What each stored status of the execution lifecycle (teraslice.Roles())
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
// "start" is [Startup] within the failover allowance ([Policy].Failovers);
// "crash, budget spent" is [Startup] after the controller died in that
// status (an OOM kill: nothing is written, the status stays) once more
// unexpected restarts than the allowance happened within its window. A
// crash loop is impossible by construction: the restart past the
// allowance fails the execution. Where the work is not restartable or the platform does
// not restart controllers, every "resume" after a crash is "fail" and
// every "relocate" is "shutdown". "stop requested" is the cluster master
// writing stopping. The package's tests enumerate this table from the
// functions themselves and fail if this copy disagrees.
//
// # The final status
//
// [End] decides what a controller writes when its work ends or it is
// shut down, from the stored status and the work's [Ending]: whether it
// finished, how many units failed, whether an error ended it. Teraslice's
// execution controller makes the same decision on exit. For the
// execution lifecycle (a relocating record is the successor's to end):
//
//	stored status  finished     with failures  with an error  shut down early
//	pending        not allowed  not allowed    not allowed    leave
//	scheduling     not allowed  → failed       → failed       leave
//	initializing   not allowed  → failed       → failed       → terminated
//	running        → completed  → failed       → failed       → terminated
//	recovering     → completed  → failed       → failed       → terminated
//	relocating     leave        leave          leave          leave
//	failing        → completed  → failed       → failed       → terminated
//	paused         → completed  → failed       → failed       → terminated
//	stopping       → completed  → failed       → failed       → stopped
//	completed      keep         keep           keep           keep
//	stopped        keep         keep           keep           keep
//	rejected       keep         keep           keep           keep
//	failed         keep         keep           keep           keep
//	terminated     keep         keep           keep           keep
//
// "keep" writes only the caller's metadata (the work's statistics) on an
// execution that has already ended: a reaper stopped it meanwhile, or
// the controller failed it earlier; an ended execution is never given
// another status (Teraslice would write completed over stopped).
// "leave" writes nothing; shut down before anything ran (pending,
// scheduling) it also releases the execution as it is, for the next
// controller to start. "not allowed" is an error: the table has no such move (work
// cannot finish before it ran). [Decider.End] writes the
// decision with the statistics and lets the execution go; the process
// then exits 0 whatever the status, since the outcome is in the record,
// but after a "leave" with Outcome.ExitCode: on a platform that restarts
// controllers the relocation's, so that the controller that ends the
// execution still comes.
//
// # Rerun (Teraslice's recover)
//
// An ended execution is never restarted; its unfinished work is
// re-processed by a new one. [Rerun] creates it (linked to the old one
// by [MetaRerunOf], the old record untouched, refused for an execution
// that has not ended), [Reruns] lists an execution's reruns, and
// [Startup] tells the new execution's controller what it reruns
// (Verdict.RerunOf), so it runs recovering before running.
//
// # Budgets and timers
//
// A table counts moves ([transition.Builder.Count]): Running → Restarting
// adds to "failures" in the same write, whoever makes it. A [Budget]
// limits a counter: its allowance (zero allows none; an execution may
// carry its own, [LimitKey]), its window, its backoff, and the end an
// exhausted budget moves to. Budgets are kept apart: a job's failures,
// its submissions, its disruptions (a preemption spends no failure
// budget unless the table counts it as one), and a controller's own
// failovers ([Policy].Failovers) are each their own.
//
// A [Timer] moves an execution on from a state once it falls due: after
// a time in the state (a deadline: relocating that nobody takes over,
// stopping past the shutdown timeout, [RolesBuilder.Deadline]), after a
// time since the execution's start across restarts (a job-wide active
// deadline), or once a budget's backoff is over (a pending retry
// resubmitted), to any state the table allows. An execution may carry its
// own duration ([TimerKey]). Nothing is implied: no state has a timer the
// roles do not give, and teraslice.Roles() spells out Teraslice's.
//
// [Roles.Due] says what falls due next and when. [Startup] honours it (a
// stale relocating record is failed, not resumed, or relocating would
// become the new "stuck in running"; a controller started during a
// backoff waits, [Verdict].Until); [Decider.Advance] makes the move from
// a controller's own loop; the [Reaper] makes it, as an outside
// authority, while nobody else looks. The Reaper also fails an abandoned
// execution, when asked ([ReaperOptions].Abandoned): running, with no
// live holder ([storage.Store].Held), and taken over by nobody in time.
//
// When the platform gives up on an execution (its Kubernetes Job failed or
// was deleted), nothing needs to wait for a deadline: the cluster master
// ends it at once with [Decider.Abandon], never overruling a live
// controller.
package recovery
