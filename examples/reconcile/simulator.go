package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// simulatorConfig is what a manager tells a simulator it starts.
type simulatorConfig struct {
	World string `json:"world"`
	Label label  `json:"label"`
}

// runSimulator is a stand-in for a real-time simulator: it announces
// itself in the world, reports its state, pauses on SIGUSR1, resumes on
// SIGUSR2 and stops on SIGTERM, removing itself from the world.
func runSimulator(raw json.RawMessage) int {
	var cfg simulatorConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	w := world{cfg.World}
	id := cfg.Label.UUID
	lock, err := os.OpenFile(w.path(id, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The lock lives as long as the file stays open: keep it open (and
	// out of the garbage collector's reach, whose finalizer would close
	// it) until the process ends.
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	setState := func(s string) {
		if err := writeFile(w.path(id, ".state"), []byte(s+"\n")); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM)
	setState("starting")
	l := cfg.Label
	l.PID = os.Getpid()
	data, _ := json.Marshal(l)
	if err := writeFile(w.path(id, ".json"), data); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	time.Sleep(100 * time.Millisecond) // loading the model
	setState("running")
	for sig := range signals {
		switch sig {
		case syscall.SIGUSR1:
			setState("paused")
		case syscall.SIGUSR2:
			setState("running")
		case syscall.SIGTERM:
			setState("stopping")
			for _, ext := range []string{".json", ".state", ".lock"} {
				_ = os.Remove(w.path(id, ext))
			}
			return 0
		}
	}
	return 0
}
