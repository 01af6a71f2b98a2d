//go:build !linux

package main

// adoptOrphans is Linux's PR_SET_CHILD_SUBREAPER; elsewhere orphans are
// left to the system.
func adoptOrphans() error { return nil }

func killOrphans() []string { return nil }
