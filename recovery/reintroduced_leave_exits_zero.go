//go:build execfsm_bug_leave_exits_zero

package recovery

// bugLeaveExitsZero: a controller that leaves an execution exits 0
// whatever the platform (what Action and End said before a Job that
// completed on a Leave was seen to replace nothing). See
// reintroduced_off.go.
const bugLeaveExitsZero = true
