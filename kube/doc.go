// Package kube makes execfsm native on Kubernetes: a [storage.Store]
// on the API server (one ConfigMap per execution, compare-and-swap on
// resourceVersion, a watch that re-lists on 410 Gone), ownership through
// coordination.k8s.io/v1 Leases, adoption of batch/v1 Jobs by the
// identity in their labels and annotations, and adapters between
// reconcile.Reconciler and controller-runtime.
//
// Its tests run against a real kube-apiserver and etcd started by
// controller-runtime's envtest; kube/hack/test-assets.sh builds and
// caches the binaries.
package kube
