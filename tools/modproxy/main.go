// Command modproxy packs modules of this repository, as they are
// committed at HEAD (what a tag would publish; uncommitted changes and
// untracked files are left out), into a file-based Go module proxy at one
// version, so that
// `GOPROXY=file://DIR,https://proxy.golang.org` serves them the way the
// module proxy will once they are tagged: CI installs and tests every
// module exactly as its users will get it, before the tag exists.
//
//	go run ./tools/modproxy -version v0.1.0 -out /tmp/proxy . etcdstore kube
//
// Each argument is a module's directory relative to the repository root
// (the current directory); the zip leaves out nested modules, as the go
// command does. The version must not be one the public
// proxy already serves with other contents (checksums would disagree).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

func main() {
	version := flag.String("version", "", "the version to serve every module at (vX.Y.Z)")
	out := flag.String("out", "", "the proxy directory to write")
	flag.Parse()
	if err := run(*version, *out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

func run(version, out string, dirs []string) error {
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		return fmt.Errorf("-version %q is not a canonical semantic version (vX.Y.Z)", version)
	}
	if out == "" || len(dirs) == 0 {
		return errors.New("usage: modproxy -version vX.Y.Z -out DIR MODULE_DIR...")
	}
	for _, dir := range dirs {
		path, err := pack(version, out, dir)
		if err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		fmt.Printf("%s@%s\n", path, version)
	}
	return nil
}

// pack writes the list, info, mod and zip files of the module in dir.
func pack(version, out, dir string) (string, error) {
	dir = filepath.ToSlash(filepath.Clean(dir))
	subdir := dir
	if subdir == "." {
		subdir = ""
	}
	gomod, err := exec.Command("git", "show", "HEAD:"+path.Join(subdir, "go.mod")).Output()
	if err != nil {
		return "", fmt.Errorf("reading its committed go.mod: %w", err)
	}
	modPath := modfile.ModulePath(gomod)
	if modPath == "" {
		return "", errors.New("go.mod names no module")
	}
	escaped, err := module.EscapePath(modPath)
	if err != nil {
		return "", err
	}
	at := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return "", err
	}
	info := fmt.Sprintf("{\"Version\":%q,\"Time\":%q}\n", version, time.Now().UTC().Format(time.RFC3339))
	for name, data := range map[string][]byte{
		"list":            []byte(version + "\n"),
		version + ".info": []byte(info),
		version + ".mod":  gomod,
	} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			return "", err
		}
	}
	f, err := os.Create(filepath.Join(at, version+".zip"))
	if err != nil {
		return "", err
	}
	if err := zip.CreateFromVCS(f, module.Version{Path: modPath, Version: version}, ".", "HEAD", subdir); err != nil {
		f.Close()
		return "", err
	}
	return modPath, f.Close()
}
