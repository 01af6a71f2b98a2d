package boltstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/execfsm/execfsm/storage"

	"github.com/execfsm/execfsm/boltstore"
	"github.com/stretchr/testify/require"
)

// childReadDamaged opens a possibly damaged file and uses every read path
// and a write, printing what each returned; it prints "survived" last. A
// memory fault or a panic in bbolt would kill it before that.
func childReadDamaged(path string) int {
	say := func(op string, err error) {
		verdict := "ok"
		if err != nil {
			verdict = "error"
			if errors.Is(err, storage.ErrCorrupt) {
				verdict = "corrupt"
			}
		}
		fmt.Printf("%s %s\n", op, verdict)
	}
	db, err := boltstore.Open(path, boltstore.Options{Timeout: time.Second})
	say("open", err)
	if err == nil {
		defer db.Close()
		s, err := db.Store("executions")
		say("store", err)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for k := range 40 {
				_, err := s.Get(ctx, fmt.Sprint("ex-", k))
				say("get", err)
			}
			_, _, err = s.List(ctx)
			say("list", err)
			_, err = s.Create(ctx, storage.Record{ID: "ex-new", Status: "running"})
			say("create", err)
			if ch, err := s.Watch(ctx, 0); err == nil {
				n := 0
				for range ch {
					if n++; n == 40 {
						break
					}
				}
				say("watch", nil)
			} else {
				say("watch", err)
			}
			say("check", db.Check())
		}
	}
	fmt.Println("survived")
	return 0
}

// readDamaged runs childReadDamaged on path and returns its output; it
// fails the test unless the child lived to say "survived".
func readDamaged(t *testing.T, path string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "BOLTSTORE_CHILD=read-damaged", "BOLTSTORE_PATH="+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	done := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(out); done <- b }()
	var got []byte
	select {
	case got = <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the child reading %s hung", path)
	}
	werr := cmd.Wait()
	require.NoError(t, werr, "the process died reading the damaged file:\n%s\n%s", got, firstLines(stderr.String(), 12))
	require.True(t, strings.HasSuffix(string(got), "survived\n"), "output:\n%s", got)
	return string(got)
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// goodFile writes a database with 40 records and returns its bytes.
func goodFile(t *testing.T) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "good")
	db, s := openStore(t, path, boltstore.Options{})
	for k := range 40 {
		rec := storage.Record{ID: fmt.Sprint("ex-", k), Status: "running", Reason: strings.Repeat("r", 300)}
		_, err := s.Create(bg, rec)
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return data
}

// The reproduction: truncated files killed Open with "fatal error: fault"
// or "invalid freelist page", and random byte flips in data pages killed
// the process in the watch goroutine and in Check while Get and List
// returned ErrCorrupt. Every path must return an error, never kill.
func TestDamagedFilesNeverKillTheProcess(t *testing.T) {
	data := goodFile(t)
	page := os.Getpagesize()
	dir := t.TempDir()
	// Each file is read by a child process of its own; they run side by
	// side (a group's Run returns when its parallel subtests are done).
	var noticed atomic.Int64
	seeds := 20
	if testing.Short() {
		seeds = 5
	}
	t.Run("files", func(t *testing.T) {
		for _, size := range []int{page, 2 * page, 3*page + 100, len(data) / 2, len(data) - page} {
			t.Run(fmt.Sprint("truncated at ", size), func(t *testing.T) {
				t.Parallel()
				path := filepath.Join(dir, fmt.Sprint("truncated-", size))
				require.NoError(t, os.WriteFile(path, data[:size], 0o600))
				out := readDamaged(t, path)
				// A cut into the pages in use is refused at Open; bbolt grows
				// its file ahead of use, so a cut into the unused tail may
				// lose nothing.
				if !strings.Contains(out, "open corrupt") {
					require.NotContains(t, out, "corrupt", "cut at %d of %d bytes: it opened, so it must read", size, len(data))
				}
			})
		}
		for seed := range seeds {
			t.Run(fmt.Sprint("bytes flipped, seed ", seed), func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewPCG(uint64(seed), 7))
				damaged := append([]byte(nil), data...)
				for range 8 { // flip bytes in data pages, past the two meta pages
					at := 2*page + rng.IntN(len(damaged)-2*page)
					damaged[at] ^= byte(1 + rng.IntN(255))
				}
				path := filepath.Join(dir, fmt.Sprint("flipped-", seed))
				require.NoError(t, os.WriteFile(path, damaged, 0o600))
				if strings.Contains(readDamaged(t, path), "corrupt") {
					noticed.Add(1)
				}
			})
		}
	})
	t.Logf("%d of %d damaged files were reported corrupt somewhere; the rest read as they were", noticed.Load(), seeds)
	require.Positive(t, noticed.Load(), "the damage reached nothing: the test tests nothing")
}
