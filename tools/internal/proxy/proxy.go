// Package proxy packs modules of this repository, as they are in the
// working tree (in a clean clone: what a tag would publish), into a
// file-based Go module proxy at one version, so that
// GOPROXY=file://DIR,https://proxy.golang.org serves them the way the
// module proxy will once they are tagged: every module is installed and
// tested exactly as its users will get it, before the tag exists.
//
// The zip of a module leaves out nested modules and version-control
// directories, as the go command does. The version must not be one the
// public proxy already serves with other contents (checksums would
// disagree), which is why the tests use the next, untagged version.
package proxy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

// Pack writes the list, info, mod and zip files of the module in dir into
// the proxy directory out, at version, and returns the module's path.
func Pack(version, out, dir string) (string, error) {
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		return "", fmt.Errorf("version %q is not a canonical semantic version (vX.Y.Z)", version)
	}
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	modPath := modfile.ModulePath(gomod)
	if modPath == "" {
		return "", fmt.Errorf("%s: go.mod names no module", dir)
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
	if err := zip.CreateFromDir(f, module.Version{Path: modPath, Version: version}, dir); err != nil {
		return "", errors.Join(err, f.Close())
	}
	return modPath, f.Close()
}
