package kube

// SetBeforeTakeOverWrite makes s call f in Acquire after taking an
// execution's Lease and reading its record, just before writing the
// take-over: where a test plays a concurrent writer.
func SetBeforeTakeOverWrite(s *Store, f func()) { s.beforeTakeOverWrite = f }

// ListPageSize is how many ConfigMaps List asks the API server for at
// a time.
const ListPageSize = listPageSize
