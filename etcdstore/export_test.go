package etcdstore

// ListPage is how many records List asks etcd for at a time.
const ListPage = listPage
