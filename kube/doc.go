// Package kube makes execfsm native on Kubernetes: a [storage.Store] on
// the API server, ownership through coordination.k8s.io/v1 Leases,
// adoption of batch/v1 Jobs by the identity in their labels and
// annotations, and the batch/v1 Job that runs a controller (package
// kube/ctrlruntime adapts reconcilers to controller-runtime). Install it
// with
//
//	go get github.com/execfsm/execfsm/kube
//
// Pick [Store] when your controllers already run on Kubernetes and you
// would rather not operate an etcd of your own: each execution is a
// ConfigMap (no CRD to install; `kubectl get cm -l
// execfsm.io/status=relocating` lists executions by status), written with
// optimistic concurrency on resourceVersion, watched with a re-list on 410
// Gone. Open it with [New]; then the startup and SIGTERM path of package
// recovery is unchanged (see the package example).
//
// # Ownership
//
// The Lease's holderIdentity is the owner, its leaseTransitions the
// epoch. A live holder (renewed within leaseDurationSeconds) cannot be
// taken over; a relocated pod's successor takes the Lease once the old
// one is released or expired, and the old pod's writes are fenced.
// Kubernetes has no transaction across the Lease and the ConfigMap, so
// the holder keeps its own time: its renewTime is when each renewal
// began, and it sends no write (and closes Lost) once a lease duration
// has passed since the last one that succeeded; each write's request
// ends at that expiry. A write the API server received just before it
// may still be applied.
//
// A deleted record ([Store.Delete]) takes its Lease with it, through
// the garbage collector (the ConfigMap owns it); the store's epoch floor
// ([Store.FloorName], a ConfigMap no list sees) keeps the next life of
// the id above every epoch of the old one.
//
// # Adoption
//
// [Jobs] lists a controller's Jobs by a label selector, keys each by one
// label and hands the Adopter their labels and annotations as the item's
// identity. The ownerReference trap: Jobs owned by the controller's own
// Pod are garbage-collected when that Pod is replaced, which a relocation
// does; own them by something that survives (the controller's Deployment
// or Job) or by nothing.
//
// # The controller's Job
//
// [ControllerJob] builds the batch/v1 Job that runs an execution's
// controller: restartPolicy Never, the execution's identity on the Job
// and its pods, status and relocatable labels on the Job (a pod template
// cannot change, so pods carry none to go stale), an owner that outlives its
// pods, and a podFailurePolicy under which a relocation (exit 143, or a
// pod marked DisruptionTarget by a drain or an eviction) is never a
// failed pod while an OOM kill still is. [LabelJob] keeps the labels
// current; [JobFailure] says when the Job's crash limit was reached
// before the execution's failover allowance.
//
// # Nothing stranded
//
// An execution must never wait for a controller that will not come. The
// cluster master follows its controllers' Jobs with [Jobs.Events] and,
// when one fails ([JobFailure]) or is deleted, ends its execution with
// recovery.Decider.Abandon at once (see the example): failed with the
// Job's reason, or stopped if it was stopping; a relocating execution
// would otherwise wait for the Reaper. Run the Reaper too
// (recovery.Decider.NewReaper, in a reconcile.Loop over the store): it
// ends what nothing else does, a relocation nobody took over, a stop past
// its deadline, an execution whose controller stopped renewing its Lease.
//
// Deleting an execution's ConfigMap (kubectl delete cm) ends its
// controller's ownership: its next write fails with storage.ErrNotFound
// and Lost closes, and without a write Lost closes when the Lease goes,
// which it does with the record: the Lease is owned by the ConfigMap, so
// Kubernetes' garbage collector deletes it.
//
// # What kubectl shows
//
// `kubectl get cm -l execfsm.io/status=relocating` lists executions by
// status; `kubectl get cm NAME -o yaml` shows the record as indented JSON;
// [Events] posts an Event on the record's ConfigMap for every move, so
// `kubectl describe cm NAME` and `kubectl get events` tell its life. A
// controller's Job completes whenever its controller exits 0, which it
// does after every end, a failure included (a non-zero exit would only
// start a replacement that refuses): the execution's outcome is its
// record's status and its Events, and LabelJob copies the status onto
// the Job. A controller that leaves an execution it does not hold
// (recovery's Leave: SIGTERM before its first start, a take-over by
// another) exits with the relocation's code instead, which the
// podFailurePolicy ignores: the execution has not ended, and its Job
// must make the controller that ends it.
//
// # Permissions
//
// [MasterRole], [ControllerRole] and [ReaderRole] are the least each part
// needs, as rbac/v1 Roles for the store's namespace (rbac/roles.yaml in
// this module holds the same, for kubectl apply -n NAMESPACE -f); the
// package's tests run the master and every controller as users bound
// to nothing else, and a test takes each verb away in turn and sees the
// part fail without it. A controller gets no list and no create on
// ConfigMaps: it reads and writes the one record it was started for.
//
// RBAC cannot confine create, list or watch to some objects, and update
// on ConfigMaps reaches every ConfigMap of the namespace, whatever it
// holds: give executions a namespace of their own (Options.Namespace),
// where a compromised controller can reach other executions' records
// and Leases but not your applications' configuration. Finer than that
// is possible for get and update only, with resourceNames: a master that
// binds each controller to a Role naming its own execution's ConfigMap
// and Lease (Store.Name) confines it to that execution, except for the
// Lease's create, which RBAC cannot restrict by name.
//
// # controller-runtime
//
// Package ctrlruntime (kube/ctrlruntime) runs a reconcile.Reconciler in a
// manager and a controller-runtime reconciler in a reconcile.Loop. It is
// a package of its own so that this one does not compile
// controller-runtime.
//
// Its tests run against a real kube-apiserver and etcd started by
// controller-runtime's envtest; kube/hack/test-assets.sh builds and caches
// both from the Go module proxy.
package kube
