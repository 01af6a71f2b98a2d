package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/execfsm/execfsm/tools/internal/proxy"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// releaseFile records the last release: its version ("none" before the
// first), written by hack/release.sh in the release commit, beside the
// API baselines of api/. The release is the last commit that wrote it.
const releaseFile = "api/RELEASE"

// lastRelease reads the release record of the repository at root: the
// version and the commit that set it; ok is false before the first
// release.
func lastRelease(ctx context.Context, root string) (version, commit string, ok bool, err error) {
	data, err := os.ReadFile(filepath.Join(root, releaseFile))
	if err != nil {
		return "", "", false, fmt.Errorf("the release record: %w", err)
	}
	version = lastLine(string(data))
	if version == "none" {
		return "", "", false, nil
	}
	if !semver.IsValid(version) || semver.Prerelease(version) != "" || semver.Build(version) != "" {
		return "", "", false, fmt.Errorf("%s names %q, want vX.Y.Z or none", releaseFile, version)
	}
	commit, err = output(ctx, root, nil, "git", "log", "-1", "--format=%H", "--", releaseFile)
	if err != nil {
		return "", "", false, fmt.Errorf("the commit of release %s: %w", version, err)
	}
	if commit = strings.TrimSpace(commit); commit == "" {
		return "", "", false, fmt.Errorf("release %s: no commit of this clone wrote %s (a shallow clone?)", version, releaseFile)
	}
	return version, commit, true, nil
}

// lastLine is the last line of text that is not empty or a comment.
func lastLine(text string) string {
	last := ""
	for _, line := range strings.Split(text, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			last = line
		}
	}
	return last
}

// nextVersion is the version the modules as they are now are packed at
// beside release: a prerelease of the next patch, after it in semver.
func nextVersion(release string) string {
	parts := strings.Split(strings.TrimPrefix(release, "v"), ".")
	patch, _ := strconv.Atoi(parts[2])
	return fmt.Sprintf("v%s.%s.%d-skew", parts[0], parts[1], patch+1)
}

// skewPair is one module tested beside a release of the others: the
// source it is tested from, and the version it requires each of the
// repository's modules at.
type skewPair struct {
	name     string
	dir      string            // the module's source
	requires map[string]string // module path → version
}

// skewTest tests the modules across the last release, as users combine
// them: minimal version selection lets a user upgrade the core module
// alone, and a store module released alone must run on the core it was
// released beside. So every nested module of the last release is tested
// against the core as it is now, and every nested module as it is now
// against the core of the last release, each with its own tests,
// through a proxy holding both (and a module cache of their own: the
// release and the modules now may share a version number). Before the
// first release there is nothing to test against.
func skewTest(ctx context.Context, root, tmp string, mods []mod, env []string, w io.Writer) error {
	release, commit, ok, err := lastRelease(ctx, root)
	if err != nil || !ok {
		if err == nil {
			fmt.Fprintf(w, "no release recorded (%s): the skew test starts with the first\n", releaseFile)
		}
		return err
	}
	prev := filepath.Join(tmp, "skew-release")
	if err := extractCommit(ctx, root, commit, prev); err != nil {
		return err
	}
	next := nextVersion(release)
	proxyDir := filepath.Join(tmp, "skew-proxy")
	var pairs []skewPair
	for _, m := range mods {
		rel, err := filepath.Rel(root, m.dir)
		if err != nil {
			return err
		}
		if !public(m.path) {
			continue // not installed by users: the examples, the suites, these tools
		}
		if !isModule(filepath.Join(prev, rel)) {
			continue // a module the release did not have
		}
		if _, err := proxy.Pack(release, proxyDir, filepath.Join(prev, rel)); err != nil {
			return fmt.Errorf("packing %s of release %s: %w", m.path, release, err)
		}
		if _, err := proxy.Pack(next, proxyDir, m.dir); err != nil {
			return fmt.Errorf("packing %s as it is now: %w", m.path, err)
		}
		if rel == "." {
			continue
		}
		released, now := map[string]string{}, map[string]string{}
		for _, other := range mods {
			if public(other.path) {
				released[other.path], now[other.path] = release, next
			}
		}
		released[mods[0].path], now[mods[0].path] = next, release
		pairs = append(pairs,
			skewPair{name: m.path + "@" + release + " with the core now", dir: filepath.Join(prev, rel), requires: released},
			skewPair{name: m.path + " now with the core of " + release, dir: m.dir, requires: now})
	}
	skewEnv := append(without(without(without(env, "GOPROXY"), "GOMODCACHE"), "GOWORK"),
		"GOWORK=off", "GOPROXY=file://"+filepath.ToSlash(proxyDir)+","+upstreamProxy(env),
		"GOMODCACHE="+filepath.Join(tmp, "skew-modcache"), "GOFLAGS=-mod=mod -modcacherw", "GONOSUMDB="+mods[0].path)
	var failed []string
	for k, p := range pairs {
		dir := filepath.Join(tmp, fmt.Sprintf("skew-%d", k))
		if err := copyModule(p.dir, dir); err != nil {
			return err
		}
		if err := requireAt(dir, p.requires); err != nil {
			return err
		}
		fmt.Fprintf(w, "== skew: %s\n", p.name)
		if err := runTo(ctx, w, w, false, dir, skewEnv, "go", "test", "-count=1", "./..."); err != nil {
			failed = append(failed, p.name)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("across release %s: %s", release, strings.Join(failed, "; "))
	}
	return nil
}

// upstreamProxy is the GOPROXY of env after the local one: where
// everything else comes from.
func upstreamProxy(env []string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GOPROXY="); ok {
			if _, rest, found := strings.Cut(v, ","); found && strings.HasPrefix(v, "file://") {
				return rest
			}
			return v
		}
	}
	return "https://proxy.golang.org,direct"
}

// requireAt rewrites the go.mod of the module in dir to require each of
// requires' modules it requires at the version given, with none of this
// repository's replaces, and drops their sums (the proxy's are other).
func requireAt(dir string, requires map[string]string) error {
	path := filepath.Join(dir, "go.mod")
	f, err := readModFile(path)
	if err != nil {
		return err
	}
	for _, r := range append([]*modfile.Replace(nil), f.Replace...) {
		if _, ours := requires[r.Old.Path]; ours {
			if err := f.DropReplace(r.Old.Path, r.Old.Version); err != nil {
				return err
			}
		}
	}
	for _, r := range f.Require {
		if v, ours := requires[r.Mod.Path]; ours {
			if err := f.AddRequire(r.Mod.Path, v); err != nil {
				return err
			}
		}
	}
	if err := writeModFile(path, f); err != nil {
		return err
	}
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	var kept []byte
	for _, line := range bytes.SplitAfter(sum, []byte("\n")) {
		mod, _, _ := bytes.Cut(line, []byte(" "))
		if _, ours := requires[string(mod)]; !ours {
			kept = append(kept, line...)
		}
	}
	return os.WriteFile(filepath.Join(dir, "go.sum"), kept, 0o644)
}

// extractCommit writes the files of commit (git archive) under dir.
func extractCommit(ctx context.Context, root, commit, dir string) error {
	var archive bytes.Buffer
	cmd := command(ctx, root, nil, "git", "archive", "--format=tar", commit)
	cmd.Stdout = &archive
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git archive %s: %w: %s", commit, err, stderr.String())
	}
	r := tar.NewReader(&archive)
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(target, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("git archive %s: %s leaves the directory", commit, h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			data, err := io.ReadAll(r)
			if err != nil {
				return err
			}
			if err := os.WriteFile(target, data, 0o644|os.FileMode(h.Mode)&0o111); err != nil {
				return err
			}
		}
	}
}
