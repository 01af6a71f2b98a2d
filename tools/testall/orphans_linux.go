package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// adoptOrphans makes testall the reaper of every process started under it
// that outlives its parent: a test's etcd or kube-apiserver (envtest runs
// them in process groups of their own) when the test binary was killed.
// Without it they would be adopted by init and run on.
func adoptOrphans() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// killOrphans kills and reaps every child testall has that it did not
// start itself, that is, every orphan it adopted, and returns what was
// still running. An orphan that has exited already (a detached child
// process an example's test waited for) is only reaped. It is called
// when nothing testall started is running.
func killOrphans() []string {
	var killed []string
	for range 10 { // an orphan's own children may be adopted as it dies
		found := false
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if err != nil {
				continue
			}
			// pid (comm) state ppid ...: comm may hold spaces and
			// parentheses, so read after the last ")".
			s := string(stat)
			end := strings.LastIndexByte(s, ')')
			fields := strings.Fields(s[end+1:])
			if len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) {
				continue
			}
			found = true
			if fields[0] != "Z" { // not a zombie: still running
				_ = syscall.Kill(pid, syscall.SIGKILL)
				comm := s[strings.IndexByte(s, '(')+1 : end]
				killed = append(killed, fmt.Sprintf("%s (pid %d)", comm, pid))
			}
			var status syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &status, 0, nil)
		}
		if !found {
			break
		}
	}
	return killed
}
