//go:build !linux

package embedded

import "net"

// reusePorts is false where a port cannot be held beside etcd's
// listener: a port is chosen by listening on it and letting it go, and
// another process may take it before etcd binds it.
const reusePorts = false

// reservePort returns a loopback port that was free a moment ago; the
// caller releases it before etcd binds it.
func reservePort() (port int, release func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, nil, err
	}
	return l.Addr().(*net.TCPAddr).Port, func() { _ = l.Close() }, nil
}
