package kube

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Names of the Roles this package describes.
const (
	MasterRoleName     = "execfsm-master"
	ControllerRoleName = "execfsm-controller"
	ReaderRoleName     = "execfsm-reader"
)

// MasterRole is the least a cluster master needs in the store's
// namespace: create executions and write as their outside authority
// (a stop request, a failure the controller's Job reported, the
// Reaper's deadlines), delete the ended ones (Store.Delete, which also
// keeps the store's epoch floor ConfigMap), list and watch them
// (StoreKeys, StoreEvents),
// see whether a controller holds one (Store.Held), and create, adopt,
// follow and label the controllers' Jobs (ControllerJob, Jobs.List,
// Jobs.Events, LabelJob), and post the Events of its moves (Events).
//
// Bind it to the master's service account with a RoleBinding in that
// namespace; the package's tests run the master as a user bound to
// nothing else. rbac/roles.yaml in this module is the same three Roles
// as a manifest.
func MasterRole(namespace string) *rbacv1.Role {
	return role(namespace, MasterRoleName, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch", "create", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
	})
}

// ControllerRole is the least an execution's controller needs: read and
// write its execution's record (a ConfigMap it never creates or lists)
// and take, renew and give up the execution's Lease, watching it while
// it waits for a live holder to let go (without watch it would wait the
// holder's whole lease duration, even after a release), and post the
// Events of its moves (Events).
//
// A controller that also runs a reconcile.Loop over the store
// (StoreKeys, StoreEvents) needs ReaderRole too.
func ControllerRole(namespace string) *rbacv1.Role {
	return role(namespace, ControllerRoleName, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
	})
}

// ReaderRole reads what the store keeps and writes nothing: every
// record, their changes as they happen, and who holds each (Store.Held):
// the operator's CLI (execfsm --kube), a dashboard, the metrics'
// Statuses.
func ReaderRole(namespace string) *rbacv1.Role {
	return role(namespace, ReaderRoleName, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get"}},
	})
}

// ResourceMasterRole is MasterRole for a store over the user's custom
// resource gvr (Options.Resource): the resources, and their status
// subresource, take the place of the record ConfigMaps. It creates them
// (Resource.New) and deletes the ended ones; ConfigMaps are read and
// written for the store's table and its epoch floor only.
func ResourceMasterRole(namespace string, gvr schema.GroupVersionResource) *rbacv1.Role {
	return role(namespace, MasterRoleName, []rbacv1.PolicyRule{
		{APIGroups: []string{gvr.Group}, Resources: []string{gvr.Resource}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
		{APIGroups: []string{gvr.Group}, Resources: []string{gvr.Resource + "/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get"}},
		{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch", "create", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
	})
}

// ResourceControllerRole is ControllerRole for a store over the user's
// custom resource gvr: it reads its execution's resource and patches its
// status (never its spec: it has no update), reads the epoch floor's
// ConfigMap when it takes an execution over, and keeps the Lease.
func ResourceControllerRole(namespace string, gvr schema.GroupVersionResource) *rbacv1.Role {
	return role(namespace, ControllerRoleName, []rbacv1.PolicyRule{
		{APIGroups: []string{gvr.Group}, Resources: []string{gvr.Resource}, Verbs: []string{"get"}},
		{APIGroups: []string{gvr.Group}, Resources: []string{gvr.Resource + "/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
	})
}

// ResourceReaderRole is ReaderRole for a store over the user's custom
// resource gvr.
func ResourceReaderRole(namespace string, gvr schema.GroupVersionResource) *rbacv1.Role {
	return role(namespace, ReaderRoleName, []rbacv1.PolicyRule{
		{APIGroups: []string{gvr.Group}, Resources: []string{gvr.Resource}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get"}},
	})
}

func role(namespace, name string, rules []rbacv1.PolicyRule) *rbacv1.Role {
	return &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"app.kubernetes.io/part-of": "execfsm"}},
		Rules:      rules,
	}
}
