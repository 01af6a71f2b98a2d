// Package proctest holds the checks the examples' tests make of the
// processes they leave behind.
package proctest

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
)

// Gone reports whether process pid no longer runs: it does not exist, or
// it is a zombie (dead, waiting for a parent that may never reap it, as
// under a container's init that does not reap orphans).
func Gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// The state is the field after the parenthesised command name.
	if k := bytes.LastIndexByte(stat, ')'); k >= 0 && k+2 < len(stat) {
		return stat[k+2] == 'Z' || stat[k+2] == 'X'
	}
	return false
}
