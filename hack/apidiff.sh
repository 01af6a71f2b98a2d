#!/usr/bin/env bash
# Checks the exported API of every public package against the baseline
# committed in api/ (apidiff's export data, gzipped: the Kubernetes
# packages' carry the types they use from client-go), with
# golang.org/x/exp/cmd/apidiff, and fails on an
# incompatible change. From the first tag on, an incompatible change is a
# decision: make it with `hack/apidiff.sh update` in the same commit, and
# say so in CHANGELOG.md.
#
#   hack/apidiff.sh          check (CI)
#   hack/apidiff.sh update   rewrite the baseline from the working tree
set -euo pipefail
cd "$(dirname "$0")/.."

apidiff="go run golang.org/x/exp/cmd/apidiff@v0.0.0-20261113113407-e3970619a1a4"
mode=${1:-check}

# The public packages: those of the published modules (the core, boltstore, etcdstore,
# kube, looplabfsm and prom), internal ones left out.
packages() {
	for dir in . boltstore etcdstore kube looplabfsm prom; do
		(cd "$dir" && go list ./...) | grep -v '/internal'
	done
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
for pkg in $(packages); do
	name=${pkg#github.com/execfsm/}
	file="api/${name//\//_}.export.gz"
	case "$mode" in
	update)
		mkdir -p api
		$apidiff -w "$tmp/export" "$pkg"
		gzip -9 -n -c "$tmp/export" > "$file"
		;;
	check)
		if [ ! -f "$file" ]; then
			echo "apidiff: $pkg has no baseline ($file): hack/apidiff.sh update"
			failed=1
			continue
		fi
		gzip -d -c "$file" > "$tmp/export"
		report=$($apidiff -incompatible "$tmp/export" "$pkg")
		if [ -n "$report" ]; then
			echo "apidiff: incompatible changes in $pkg:"
			echo "$report" | sed 's/^/  /'
			failed=1
		fi
		;;
	*)
		echo "usage: hack/apidiff.sh [check|update]" >&2
		exit 2
		;;
	esac
done
for file in api/*.export.gz; do
	[ -e "$file" ] || continue
	found=0
	for pkg in $(packages); do
		name=${pkg#github.com/execfsm/}
		[ "$file" = "api/${name//\//_}.export.gz" ] && found=1
	done
	if [ "$found" = 0 ]; then
		echo "apidiff: $file is the baseline of a package that is gone: remove it with hack/apidiff.sh update's commit, and say so in CHANGELOG.md"
		[ "$mode" = check ] && failed=1
	fi
done
exit "$failed"
