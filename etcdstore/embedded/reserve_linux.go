//go:build linux

package embedded

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// reusePorts says whether etcd binds beside the reservations, which
// needs SO_REUSEPORT on its listeners.
const reusePorts = true

// reservePort binds a socket to a free loopback port without listening
// on it, and keeps it bound until release. The kernel hands a bound port
// to nobody else (not to another Listen on port 0, not as the local port
// of an outgoing connection), so no other test can take it between the
// choice and etcd's bind, or while a member is stopped; etcd binds beside
// it with SO_REUSEPORT, which this socket allows. Not listening, it
// takes no connection: one to a stopped member is refused, as it should
// be. (A port chosen by listening and closing again was taken, before
// etcd bound it, by another test's connection in a CI run.)
func reservePort() (port int, release func(), err error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, nil, err
	}
	release = func() { _ = syscall.Close(fd) }
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		release()
		return 0, nil, err
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		release()
		return 0, nil, err
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		release()
		return 0, nil, err
	}
	return sa.(*syscall.SockaddrInet4).Port, release, nil
}
