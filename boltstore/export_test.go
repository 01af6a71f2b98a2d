package boltstore

import "sync"

// HoldWriter takes the writer's turn, as a long write would, until the
// returned function is called (once or more).
func (db *DB) HoldWriter() (release func()) {
	db.writer <- struct{}{}
	var once sync.Once
	return func() { once.Do(func() { <-db.writer }) }
}
