#!/usr/bin/env bash
# Provides the binaries controller-runtime's envtest needs to run a real
# Kubernetes API server on 127.0.0.1, and the controller manager whose Job
# controller the Job tests run against it, and prints the directory that
# holds them (for KUBEBUILDER_ASSETS):
#
#   kube-apiserver           built from k8s.io/kubernetes through the Go
#                            module proxy
#   kube-controller-manager  the same way, from the same module
#   etcd                     built from go.etcd.io/etcd/server/v3
#
# Nothing but the Go toolchain and its module proxy is needed: no package
# manager, no root.
#
# Idempotent: the binaries are cached outside the clone, keyed on their
# versions ($EXECFSM_KUBE_ASSETS, default ~/.cache/execfsm/kube-assets),
# so only the first run on a machine builds (about 9 minutes on 2 cores;
# the binaries are about 200 MB). Progress goes to stderr, the directory
# to stdout.
set -euo pipefail

k8s_version=1.37.2
staging_version=0.37.2
etcd_version=3.6.16
root=${EXECFSM_KUBE_ASSETS:-$HOME/.cache/execfsm/kube-assets}
dir="$root/kubernetes-$k8s_version"
log() { echo "test-assets: $*" >&2; }

# build runs a long go build in the background and says every 30 seconds
# that it is still at it, so a first run is never a silent terminal.
build() {
	local what=$1; shift
	local start=$SECONDS
	go build "$@" >&2 &
	local pid=$!
	while ! wait_for "$pid" 30; do
		log "still building $what ($((SECONDS - start)) s)"
	done
	wait "$pid"
}

# wait_for returns 0 once pid has exited, 1 if it still runs after secs.
wait_for() {
	local k
	for ((k = 0; k < $2; k++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 1
	done
	! kill -0 "$1" 2>/dev/null
}

mkdir -p "$dir"

# Each build runs in a module of its own under a temporary directory,
# removed on exit whatever happens.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GOWORK=off GOFLAGS=-mod=mod

if [ ! -x "$dir/etcd" ] || [ "$(cat "$dir/etcd.version" 2>/dev/null)" != "$etcd_version" ]; then
	log "building etcd $etcd_version from the module proxy (first run only, about 2 minutes)"
	mkdir -p "$work/etcd" && cd "$work/etcd"
	go mod init execfsm.local/etcd-assets >&2 2>/dev/null
	go get "go.etcd.io/etcd/server/v3@v$etcd_version" >&2
	build etcd -o "$dir/etcd.tmp" go.etcd.io/etcd/server/v3
	mv "$dir/etcd.tmp" "$dir/etcd"
	echo "$etcd_version" > "$dir/etcd.version"
fi

# kube-apiserver and kube-controller-manager (whose Job controller the
# Job tests run) come from one module, so the second build reuses most of
# the first's packages.
if [ ! -x "$dir/kube-apiserver" ] || [ ! -x "$dir/kube-controller-manager" ]; then
	mkdir -p "$work/kube" && cd "$work/kube"
	go mod init execfsm.local/kube-assets >&2 2>/dev/null
	cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
GO
	go mod edit -require="k8s.io/kubernetes@v$k8s_version"
	# k8s.io/kubernetes requires its staging modules at v0.0.0 and
	# replaces them with directories of its own tree; outside that tree
	# each must be replaced with its published release. Read the list
	# from k8s.io/kubernetes's own go.mod rather than keeping a copy.
	gomod=$(go mod download -json "k8s.io/kubernetes@v$k8s_version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
	for m in $(awk '$1 ~ /^k8s\.io\// && $2 == "v0.0.0" {print $1}' "$gomod" | sort -u); do
		go mod edit -replace="$m=$m@v$staging_version"
	done
	go mod tidy -e >&2
	ldflags="-X k8s.io/component-base/version.gitVersion=v$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$k8s_version" | cut -d. -f2)"
	for bin in kube-apiserver kube-controller-manager; do
		[ -x "$dir/$bin" ] && continue
		log "building $bin $k8s_version from the module proxy (first run only, about 12 minutes on 2 cores for the first, 4 for the second)"
		build "$bin" -tags tools -ldflags "$ldflags" -o "$dir/$bin.tmp" "k8s.io/kubernetes/cmd/$bin"
		mv "$dir/$bin.tmp" "$dir/$bin"
	done
fi

"$dir/kube-apiserver" --version >&2
"$dir/kube-controller-manager" --version >&2
# Not "| head -1": under pipefail, etcd writing its remaining lines
# after head has exited is a SIGPIPE (exit 141) that fails the script.
etcd_said=$("$dir/etcd" --version 2>&1)
echo "${etcd_said%%$'\n'*}" >&2
echo "$dir"
