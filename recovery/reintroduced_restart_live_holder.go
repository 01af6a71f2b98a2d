//go:build execfsm_bug_restart_live_holder && !execfsm_bug_start_unowned

package recovery

// See reintroduced_off.go.
const (
	bugStartUnowned      = false
	bugRestartLiveHolder = true
)
