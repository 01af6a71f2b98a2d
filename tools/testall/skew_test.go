package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// skewRepo is a repository of two modules, the core and a store, as this
// one is laid out: the store requires the core at the release version
// and replaces it with the directory above.
type skewRepo struct {
	t    *testing.T
	root string
	mods []mod
}

func newSkewRepo(t *testing.T) *skewRepo {
	r := &skewRepo{t: t, root: t.TempDir()}
	r.mods = []mod{{repoPrefix, r.root}, {repoPrefix + "/boltstore", filepath.Join(r.root, "boltstore")}}
	r.git("init", "-q")
	r.write("go.mod", "module "+repoPrefix+"\n\ngo 1.25\n")
	r.write("boltstore/go.mod", "module "+repoPrefix+"/boltstore\n\ngo 1.25\n\nrequire "+repoPrefix+" v0.1.0\n\nreplace "+repoPrefix+" => ../\n")
	r.write("api/RELEASE", "none\n")
	return r
}

func (r *skewRepo) write(name, text string) {
	r.t.Helper()
	path := filepath.Join(r.root, name)
	require.NoError(r.t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(r.t, os.WriteFile(path, []byte(text), 0o644))
}

func (r *skewRepo) git(args ...string) {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
	cmd.Dir = r.root
	out, err := cmd.CombinedOutput()
	require.NoError(r.t, err, "git %v: %s", args, out)
}

// core writes the core's one function, named name.
func (r *skewRepo) core(name string) {
	r.write("core.go", "package execfsm\n\n// "+name+" greets.\nfunc "+name+"() string { return \"hi\" }\n")
}

// store writes the store, calling the core's function name in its test.
func (r *skewRepo) store(name string) {
	r.write("boltstore/store.go", "package boltstore\n\nimport \"github.com/execfsm/execfsm\"\n\n// Greeting is the core's.\nfunc Greeting() string { return execfsm."+name+"() }\n")
	r.write("boltstore/store_test.go", "package boltstore\n\nimport \"testing\"\n\nfunc TestGreeting(t *testing.T) {\n\tif Greeting() != \"hi\" {\n\t\tt.Fatal(Greeting())\n\t}\n}\n")
}

func (r *skewRepo) skew() (string, error) {
	r.t.Helper()
	var out strings.Builder
	err := skewTest(context.Background(), r.root, r.t.TempDir(), r.mods, without(os.Environ(), "GOFLAGS"), &out)
	return out.String(), err
}

// Before the first release there is nothing to test across.
func TestSkewBeforeTheFirstReleaseSaysSo(t *testing.T) {
	r := newSkewRepo(t)
	r.core("Hello")
	r.store("Hello")
	r.git("add", ".")
	r.git("commit", "-q", "-m", "start")
	out, err := r.skew()
	require.NoError(t, err)
	require.Contains(t, out, "no release recorded")
}

// A release recorded, the core changed since: an addition keeps the
// released store building and passing; a rename fails it, named, and so
// does a store now that needs what the released core lacks.
func TestSkewTestsTheReleasedStoreOnTheCoreNowAndBack(t *testing.T) {
	r := newSkewRepo(t)
	r.core("Hello")
	r.store("Hello")
	r.write("api/RELEASE", "# the last release\nv0.1.0\n")
	r.git("add", ".")
	r.git("commit", "-q", "-m", "Release v0.1.0")

	r.write("extra.go", "package execfsm\n\n// Bye parts.\nfunc Bye() string { return \"bye\" }\n")
	r.git("add", ".")
	r.git("commit", "-q", "-m", "an addition")
	out, err := r.skew()
	require.NoError(t, err, out)
	require.Contains(t, out, "skew: "+repoPrefix+"/boltstore@v0.1.0 with the core now")
	require.Contains(t, out, "skew: "+repoPrefix+"/boltstore now with the core of v0.1.0")

	r.core("Greet") // renames the released API
	r.store("Greet")
	out, err = r.skew()
	require.Error(t, err, out)
	require.ErrorContains(t, err, repoPrefix+"/boltstore@v0.1.0 with the core now")
	require.ErrorContains(t, err, repoPrefix+"/boltstore now with the core of v0.1.0")
}

func TestNextVersionIsAfterTheRelease(t *testing.T) {
	require.Equal(t, "v0.1.1-skew", nextVersion("v0.1.0"))
	require.Equal(t, "v1.2.10-skew", nextVersion("v1.2.9"))
}

// A version the README or docs/ name in a go get or go install line is
// the release recorded (api/RELEASE); before the first release they name
// none.
func TestThePagesNameOnlyTheRecordedRelease(t *testing.T) {
	root := filepath.Join("..", "..")
	record, err := os.ReadFile(filepath.Join(root, releaseFile))
	require.NoError(t, err)
	release := lastLine(string(record))
	named := regexp.MustCompile(`go (?:get|install) github\.com/execfsm/execfsm[^\s@]*@(v[0-9][^\s` + "`" + `]*)`)
	for page, text := range pageTexts(t, root) {
		for _, m := range named.FindAllStringSubmatch(text, -1) {
			require.Equal(t, release, m[1], "%s names %s, but the last release is %s (%s)", filepath.Base(page), m[1], release, releaseFile)
		}
	}
}
