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

mode=${1:-check}
case "$mode" in
check | update) ;;
*)
	echo "usage: hack/apidiff.sh [check|update]" >&2
	exit 2
	;;
esac

# The public packages: those of the published modules (the core, admin, boltstore, etcdstore,
# kube, looplabfsm, otelfsm and prom), internal ones left out.
packages() {
	for dir in . admin boltstore etcdstore kube looplabfsm otelfsm prom; do
		(cd "$dir" && go list ./...) | grep -v '/internal'
	done
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Built once: a `go run` a package spent a second or more on the go
# command alone.
GOBIN="$tmp/bin" go install golang.org/x/exp/cmd/apidiff@v0.0.0-20261113113407-e3970619a1a4
apidiff="$tmp/bin/apidiff"

# one checks (or writes the baseline of) package $1 into $tmp/$2.*; its
# report, if any, goes to $tmp/$2.report. Each loads and type-checks its
# package from source, so they run a core at a time side by side.
one() {
	local pkg=$1 out=$tmp/$2 name file
	name=${pkg#github.com/execfsm/}
	file="api/${name//\//_}.export.gz"
	case "$mode" in
	update)
		"$apidiff" -w "$out.export" "$pkg"
		gzip -9 -n -c "$out.export" > "$file"
		;;
	check)
		if [ ! -f "$file" ]; then
			echo "apidiff: $pkg has no baseline ($file): hack/apidiff.sh update" > "$out.report"
			return
		fi
		gzip -d -c "$file" > "$out.export"
		report=$("$apidiff" -incompatible "$out.export" "$pkg")
		if [ -n "$report" ]; then
			{ echo "apidiff: incompatible changes in $pkg:"; echo "$report" | sed 's/^/  /'; } > "$out.report"
		fi
		;;
	esac
}

public=$(packages) # listed once: each listing runs go list in six modules
jobs=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
n=0
pids=()
for pkg in $public; do
	n=$((n + 1))
	one "$pkg" "$n" &
	pids+=($!)
	if [ "${#pids[@]}" -ge "$jobs" ]; then
		wait "${pids[0]}" || { echo "apidiff: apidiff itself failed (its error is above)" >&2; exit 1; }
		pids=("${pids[@]:1}")
	fi
done
for pid in "${pids[@]}"; do
	wait "$pid" || { echo "apidiff: apidiff itself failed (its error is above)" >&2; exit 1; }
done
failed=0
for report in "$tmp"/*.report; do
	[ -e "$report" ] || continue
	cat "$report"
	failed=1
done
for file in api/*.export.gz; do
	[ -e "$file" ] || continue
	found=0
	for pkg in $public; do
		name=${pkg#github.com/execfsm/}
		[ "$file" = "api/${name//\//_}.export.gz" ] && found=1
	done
	if [ "$found" = 0 ]; then
		echo "apidiff: $file is the baseline of a package that is gone: remove it with hack/apidiff.sh update's commit, and say so in CHANGELOG.md"
		[ "$mode" = check ] && failed=1
	fi
done
exit "$failed"
