//go:build !unix

package wal

import "os"

// sameFile reports whether name leads to the file is describes.
func sameFile(name string, is os.FileInfo) (bool, error) { return sameFileInfo(name, is) }
