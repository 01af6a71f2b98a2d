// Package storekit is for those who write a store: the parts the stores
// of this repository are built from, public so that the stores in their
// own modules (boltstore, etcdstore, kube) and yours use them the way
// storage.Memory does, and so that a store released apart from the core
// never depends on another module's internal packages.
//
//   - locallease: ownership held in the process that holds the store.
//   - writegate: the gate a holder's writes pass through, so none lands
//     after its ownership ended.
//   - heldunder: ownerships taken under another (storage.Lease.Under).
//   - watchlog: watches from a retained log of writes that never miss a
//     change.
//   - listdecode: a listing's records decoded on every CPU.
//   - backoff: the one doubling backoff of the loops and watches.
//   - quote: untrusted text quoted, bounded, for error messages.
//
// They are versioned with the core module and under its compatibility
// check (api/): a store built against one release builds against the
// next. Each says what it promises in its own documentation; a store
// that passes storage/storagetest and recovery/recoverytest with them is
// right by the same proofs as the stores here.
package storekit
