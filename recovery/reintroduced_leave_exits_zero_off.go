//go:build !execfsm_bug_leave_exits_zero

package recovery

// bugLeaveExitsZero is a reintroduced bug (reintroduced_leave_exits_zero.go),
// off: the compiler drops the code it guards.
const bugLeaveExitsZero = false
