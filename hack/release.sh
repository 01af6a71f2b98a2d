#!/usr/bin/env bash
# Releases every module of the repository together at one version, as
# River does: the nested modules require each other at exactly that
# version, and each public module gets its tag (vX.Y.Z, admin/vX.Y.Z, boltstore/vX.Y.Z, etcdstore/vX.Y.Z,
# kube/vX.Y.Z, looplabfsm/vX.Y.Z, otelfsm/vX.Y.Z, prom/vX.Y.Z,
# cmd/execfsm/vX.Y.Z) on the same commit.
#
#   hack/release.sh v0.2.0          prepare the commit and the tags
#
# It refuses a dirty tree, a version that is not vX.Y.Z, a version already
# tagged, and a CHANGELOG.md without a "## [X.Y.Z]" section (rename
# "Unreleased" first). It sets the requires of every go.mod and the
# replaces of go.work to the version, checks the API against the baseline
# (hack/apidiff.sh), packs and tests every module at the version as users
# will get it (tools/testall), records the release (api/RELEASE, the API
# baselines rewritten beside it), commits, and tags; pushing is left to
# you:
#
#   git push origin HEAD v0.2.0 admin/v0.2.0 boltstore/v0.2.0 etcdstore/v0.2.0 kube/v0.2.0 looplabfsm/v0.2.0 otelfsm/v0.2.0 prom/v0.2.0 cmd/execfsm/v0.2.0
set -euo pipefail
cd "$(dirname "$0")/.."

version=${1:-}
if ! [[ "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
	echo "usage: hack/release.sh vX.Y.Z" >&2
	exit 2
fi
if [ -n "$(git status --porcelain)" ]; then
	echo "release: the working tree is not clean; commit or stash first" >&2
	exit 1
fi
if git rev-parse -q --verify "refs/tags/$version" >/dev/null; then
	echo "release: $version is tagged already" >&2
	exit 1
fi
if ! grep -q "^## \[${version#v}\]" CHANGELOG.md; then
	echo "release: CHANGELOG.md has no \"## [${version#v}]\" section" >&2
	exit 1
fi

public=(. admin boltstore etcdstore kube looplabfsm otelfsm prom cmd/execfsm)
paths=()
for dir in "${public[@]}"; do
	paths+=("$(cd "$dir" && GOWORK=off go list -m)")
done

# Every module's requires of the public modules, at the version.
for dir in $(go list -m -f '{{.Dir}}'); do
	self=$(cd "$dir" && GOWORK=off go list -m)
	for path in "${paths[@]}"; do
		if [ "$path" != "$self" ] && go mod edit -json "$dir/go.mod" | grep -q "\"Path\": \"$path\""; then
			go mod edit -require="$path@$version" "$dir/go.mod"
		fi
	done
done
# The workspace builds them from here at that version.
for k in "${!public[@]}"; do
	dir=${public[$k]}
	[ "$dir" = . ] && dir=. || dir=./$dir
	for old in $(go work edit -json | tr -d ' \n\t' | grep -o "\"Old\":{\"Path\":\"${paths[$k]}\",\"Version\":\"[^\"]*\"" | sed 's/.*"Version":"\([^"]*\)"/\1/'); do
		go work edit -dropreplace="${paths[$k]}@$old"
	done
	go work edit -replace="${paths[$k]}@$version=$dir"
done

hack/apidiff.sh
# Packed and checked as users will get them: every module packed at the
# version into a local proxy, installed from it, and tested on its own
# go.mod (the README's test command).
go run ./tools/testall
# The release record: the commit that writes it is the release, which
# tools/testall tests the next commits' modules across.
sed -i "\$s/.*/$version/" api/RELEASE
hack/apidiff.sh update
git commit -q -am "Release $version"
for dir in "${public[@]}"; do
	if [ "$dir" = . ]; then
		git tag -a "$version" -m "Release $version"
	else
		git tag -a "$dir/$version" -m "Release $dir $version"
	fi
done
echo "release: tagged $version; push with: git push origin HEAD $version admin/$version boltstore/$version etcdstore/$version kube/$version looplabfsm/$version otelfsm/$version prom/$version cmd/execfsm/$version"
