package proxy_test

import (
	"archive/zip"
	"os"
	"path/filepath"
	"testing"

	"github.com/execfsm/execfsm/tools/internal/proxy"
	"github.com/stretchr/testify/require"
)

// A module packed with a nested module inside: the nested one is left out
// of the zip, as the go command leaves it out.
func TestPackWritesWhatAModuleProxyServes(t *testing.T) {
	src := t.TempDir()
	files := map[string]string{
		"go.mod":        "module example.com/m\n\ngo 1.23\n",
		"m.go":          "package m\n",
		"sub/go.mod":    "module example.com/m/sub\n\ngo 1.23\n",
		"sub/sub.go":    "package sub\n",
		"pkg/inside.go": "package pkg\n",
	}
	for name, body := range files {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(src, name), []byte(body), 0o644))
	}
	out := t.TempDir()
	path, err := proxy.Pack("v1.2.3", out, src)
	require.NoError(t, err)
	require.Equal(t, "example.com/m", path)
	at := filepath.Join(out, "example.com", "m", "@v")
	list, err := os.ReadFile(filepath.Join(at, "list"))
	require.NoError(t, err)
	require.Equal(t, "v1.2.3\n", string(list))
	mod, err := os.ReadFile(filepath.Join(at, "v1.2.3.mod"))
	require.NoError(t, err)
	require.Equal(t, files["go.mod"], string(mod))
	z, err := zip.OpenReader(filepath.Join(at, "v1.2.3.zip"))
	require.NoError(t, err)
	defer z.Close()
	var names []string
	for _, f := range z.File {
		names = append(names, f.Name)
	}
	require.ElementsMatch(t, []string{"example.com/m@v1.2.3/go.mod", "example.com/m@v1.2.3/m.go", "example.com/m@v1.2.3/pkg/inside.go"}, names)

	_, err = proxy.Pack("1.2.3", out, src)
	require.Error(t, err, "not a canonical version")
}
