// Package etcdstore is a [storage.Store] on etcd v3, for controllers
// that share execution state across processes and machines, and survive
// the loss of any one of them.
//
// Records live under a key prefix ("/execfsm/" by default) as
// prefix+"records/"+id (with "%" and "/" in the id escaped as %25 and %2F,
// so a store whose prefix lies under another's keys never mixes with it),
// encoded as [storage.Record.MarshalBinary]
// writes them. A record's revision is etcd's ModRevision of its key.
// Create is one transaction comparing CreateRevision to 0;
// CompareAndSwap is one transaction comparing ModRevision to the expected
// revision, which returns the current record in the same round trip when
// it loses. [Store.Watch] follows etcd's watch and, when etcd has
// compacted the revisions it needs or the watch is cancelled, re-lists
// and re-watches so no change is ever silently missed.
//
// Ownership ([Store.Acquire], the store's side of the contract in
// [storage.Store]) binds a controller's claim on an execution to an
// etcd lease it keeps alive: the key prefix+"owners/"+id exists, bound to
// the lease, while the lease lives, and nobody else can take the execution
// over. When the owner dies and the lease expires (or it releases it), the
// next controller can, bumping the epoch in the same transaction, and the
// dead owner's writes (should it come back) are fenced. A waiting Acquire
// watches the ownership key. The record's claim (epoch/owner) is also
// kept in prefix+"claims/"+id, which CompareAndSwap compares so that no
// write changes it, in the same round trip. The holder's own writes
// ([Ownership.CompareAndSwap]) also compare the ownership key's lease:
// etcd applies none of them once the lease is gone, whether or not the
// holder has noticed yet.
//
// [Store.ListPage] reads a status index: a key per record,
// prefix+"status/"+status+"/"+id, put and deleted in the transaction that
// writes the record, so a page of a few statuses ranges over their keys
// and reads their records at one revision, whatever else the store
// holds.
//
// [Store.Delete] is one transaction comparing the record's ModRevision
// and finding no ownership key; it deletes the record and its claim key
// and raises the epoch floor (prefix+"epoch-floor", the highest epoch a
// deleted record had, compared so that racing deletes never lower it),
// above which every take-over goes: an id created again never gets back
// an epoch of its old life.
//
// Every call honours its context; a context without a deadline gets
// Options.Timeout, so an unreachable cluster yields an error, not a hang.
package etcdstore
