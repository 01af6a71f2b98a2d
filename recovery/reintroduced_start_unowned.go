//go:build execfsm_bug_start_unowned && !execfsm_bug_restart_live_holder

package recovery

// See reintroduced_off.go.
const (
	bugStartUnowned      = true
	bugRestartLiveHolder = false
)
