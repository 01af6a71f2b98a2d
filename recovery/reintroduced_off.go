//go:build !execfsm_bug_start_unowned && !execfsm_bug_restart_live_holder

package recovery

// Bugs this package once had can be compiled back in, each behind a
// build tag of its own (a third: reintroduced_leave_exits_zero.go), so
// that recovery/fleettest can show it finds them (see its
// reintroduced_*_test.go). Without the tags these are false constants
// and the compiler drops the code they guard.
const (
	// bugStartUnowned: a start on a record nobody owns writes its verdict
	// as an outside authority, taking no ownership (what ApplyStartup did
	// before every store had ownership).
	bugStartUnowned = false
	// bugRestartLiveHolder: a start retried by the live holder decides
	// again as a new controller would, counting an unexpected restart
	// (what ApplyStartup did before it recognised its own retries).
	bugRestartLiveHolder = false
)
