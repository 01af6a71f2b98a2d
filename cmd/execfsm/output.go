package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/execfsm/execfsm/admin"
	"github.com/execfsm/execfsm/boltstore"
	"github.com/execfsm/execfsm/recovery"
	"github.com/execfsm/execfsm/schema"
	"github.com/execfsm/execfsm/storage"
)

// printer writes results as text for people or as JSON for programs.
type printer struct {
	w    io.Writer
	errw io.Writer // warnings, beside what w gets
	json bool
	// table is the table the store records, once the store is open;
	// nil if it records none.
	table *schema.Document
}

// statusOf is how the text output shows a status: as it is, and said to
// be outside the recorded table if it is.
func (p *printer) statusOf(status string) string {
	if p.table == nil {
		return status
	}
	if _, known := p.table.Knows(status); !known {
		return fmt.Sprintf("%s (not a status of table %s, version %d)", status, p.table.Name, p.table.Version)
	}
	return status
}

func (p *printer) encode(v any) error {
	enc := json.NewEncoder(p.w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func owner(rec storage.Record) string {
	if rec.Owner == "" {
		return "-"
	}
	return fmt.Sprintf("%s@%d", rec.Owner, rec.Epoch)
}

// record prints one record: its fields, then its metadata.
func (p *printer) record(rec storage.Record) error {
	if p.json {
		return p.encode(rec)
	}
	tw := tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "ID:\t%s\n", rec.ID)
	fmt.Fprintf(tw, "Status:\t%s\n", p.statusOf(rec.Status))
	if rec.Previous != "" {
		fmt.Fprintf(tw, "Previous:\t%s\n", rec.Previous)
	}
	fmt.Fprintf(tw, "Since:\t%s\n", when(rec.Since))
	fmt.Fprintf(tw, "Reason:\t%s\n", oneLine(rec.Reason))
	fmt.Fprintf(tw, "Owner:\t%s\n", owner(rec))
	fmt.Fprintf(tw, "Revision:\t%d\n", rec.Revision)
	fmt.Fprintf(tw, "Updated:\t%s\n", when(rec.UpdatedAt))
	fmt.Fprintf(tw, "History:\t%d entries (keeps %d)\n", rec.History.Len(), rec.HistoryKept())
	for _, k := range slices.Sorted(maps.Keys(rec.Meta)) {
		fmt.Fprintf(tw, "Meta %s:\t%s\n", k, metaValue(rec, k))
	}
	return tw.Flush()
}

// metaValue is how the text output shows rec's metadata k: the
// library's own keys that hold machine values, readable (the restart
// times as times, not Unix milliseconds); any other as it is.
func metaValue(rec storage.Record, k string) string {
	if text, ok := recovery.CountText(k, rec.Meta[k], when); ok {
		return text
	}
	return oneLine(rec.Meta[k])
}

// oneLine keeps a reason on its line.
func oneLine(s string) string {
	if s == "" {
		return "-"
	}
	return strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", " ").Replace(s)
}

// list prints a listing: the records, one line each, then those in a
// status no version of the recorded table knows ("foreign" in JSON),
// then those that cannot be read. The JSON is the admin API's page.
func (p *printer) list(page admin.Page) error {
	if p.json {
		if page.Items == nil {
			page.Items = []storage.Record{}
		}
		return p.encode(page)
	}
	tw := tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tSINCE\tOWNER\tREVISION\tREASON")
	for _, r := range page.Items {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", r.ID, r.Status, when(r.Since), owner(r), r.Revision, oneLine(r.Reason))
	}
	for _, r := range page.Foreign {
		fmt.Fprintf(tw, "%s\t%s (not in table %s)\t%s\t%s\t%d\t%s\n", r.ID, r.Status, p.table.Name, when(r.Since), owner(r), r.Revision, oneLine(r.Reason))
	}
	for _, u := range page.Unreadable {
		fmt.Fprintf(tw, "%s\t(unreadable)\t-\t-\t%d\t%s\n", u.ID, u.Revision, oneLine(u.Err.Error()))
	}
	return tw.Flush()
}

// history prints the audit trail as a timeline, oldest first, each
// change with the revision it wrote (storage.Record.Written: the one a
// stop reports). The JSON is the trail as stored, each entry with the
// revision it was applied at.
func (p *printer) history(rec storage.Record) error {
	entries := rec.History.Entries()
	wrote := rec.Written()
	if p.json {
		if entries == nil {
			entries = []storage.Entry{}
		}
		return p.encode(entries)
	}
	tw := tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "AT\tBY\tCHANGE\tREVISION\tREASON")
	for k, e := range entries {
		by := e.Actor
		if e.Owner != "" {
			by = fmt.Sprintf("%s (%s@%d)", e.Actor, e.Owner, e.Epoch)
		}
		change := e.From + " → " + e.To
		switch {
		case e.From == "":
			change = "(created) " + e.To
		case e.From == e.To:
			change = e.To + " (same status)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", when(e.At), oneLine(by), change, wrote[k], oneLine(e.Reason))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if rec.History.Len() > 0 && rec.History.Len() >= rec.HistoryKept() {
		_, err := fmt.Fprintf(p.w, "(the trail keeps the last %d changes; older ones, if any, are not kept)\n", rec.HistoryKept())
		return err
	}
	return nil
}

// stopped prints what a stop did; its JSON is the admin API's.
func (p *printer) stopped(v admin.Stopped) error {
	if p.json {
		return p.encode(v)
	}
	if !v.Changed {
		_, err := fmt.Fprintf(p.w, "%s is %s already: nothing written\n", v.ID, v.To)
		return err
	}
	if _, err := fmt.Fprintf(p.w, "%s: %s → %s at revision %d, by %s: %s\n", v.ID, v.From, v.To, v.Revision, v.Actor, oneLine(v.Reason)); err != nil {
		return err
	}
	for _, w := range v.Warnings {
		if _, err := fmt.Fprintf(p.errw, "warning: %s\n", oneLine(w)); err != nil {
			return err
		}
	}
	return nil
}

// event prints one watch line: a record as it is now, a record gone, or
// one that cannot be read. Its JSON is a line of the admin API's watch.
func (p *printer) event(ev admin.Event) error {
	if p.json {
		return json.NewEncoder(p.w).Encode(ev) // one object per line
	}
	var line string
	switch ev.Type {
	case admin.EventUnreadable:
		line = fmt.Sprintf("%-10s %s  %v", ev.Type, ev.ID, ev.Err)
	case admin.EventGone:
		line = fmt.Sprintf("%-10s %s", ev.Type, ev.ID)
	default:
		rec := ev.Record
		line = fmt.Sprintf("%-10s %s  %s  since %s  owner %s  revision %d  %s", ev.Type, rec.ID, rec.Status, when(rec.Since), owner(rec), rec.Revision, oneLine(rec.Reason))
	}
	_, err := fmt.Fprintln(p.w, line)
	return err
}

// logDamage prints what is wrong with a bbolt file's log and what a
// repair drops (or, repaired, dropped); nil is a whole log.
func (p *printer) logDamage(path string, d *boltstore.LogDamage, repaired bool) error {
	if p.json {
		if d == nil {
			return p.encode(map[string]any{"damaged": false})
		}
		return p.encode(map[string]any{"damaged": !repaired, "repaired": repaired, "damage": d})
	}
	if d == nil {
		_, err := fmt.Fprintf(p.w, "The write-ahead log of %s is whole: nothing to repair.\n", path)
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The write-ahead log of %s is damaged:\n  %s\n", path, d.Problem)
	verb := "A repair drops"
	if repaired {
		verb = "Repaired. Dropped"
	}
	if d.Segment != "" {
		fmt.Fprintf(&b, "%s everything from byte %d of %s on:\n", verb, d.Offset, d.Segment)
	} else {
		fmt.Fprintf(&b, "%s:\n", verb)
	}
	for _, w := range d.Dropped {
		what := w.ID
		if what == "" {
			what = "the table's document"
		}
		fmt.Fprintf(&b, "  revision %d: %s in namespace %s, an acknowledged write\n", w.Revision, what, w.Namespace)
	}
	if d.UnreadableBytes > 0 {
		fmt.Fprintf(&b, "  %d bytes that cannot be read as writes (their records cannot be named)\n", d.UnreadableBytes)
	}
	if d.MissingFrom > 0 {
		fmt.Fprintf(&b, "  revisions %d to %d, already missing from the log (their records cannot be named)\n", d.MissingFrom, d.MissingTo)
	}
	if d.LogMissing != "" {
		fmt.Fprintf(&b, "  the log from %s on, which is not there: every write in it\n", d.LogMissing)
	}
	if len(d.Dropped) == 0 && d.UnreadableBytes == 0 && d.MissingFrom == 0 && d.LogMissing == "" {
		b.WriteString("  nothing acknowledged\n")
	}
	if !repaired {
		fmt.Fprintf(&b, "Those records keep the state they had before. To repair, knowing that:\n  execfsm --bolt %s repair-log --drop %s\n", path, d.Fingerprint)
	}
	_, err := io.WriteString(p.w, b.String())
	return err
}

// backedUp prints what a backup wrote: the file, the revision it is the
// store at (kind names it: a revision, or a Kubernetes resourceVersion)
// and its size.
func (p *printer) backedUp(path, kind string, revision uint64, bytes int64) error {
	if p.json {
		return p.encode(struct {
			File     string `json:"file"`
			Revision uint64 `json:"revision"`
			Bytes    int64  `json:"bytes"`
		}{path, revision, bytes})
	}
	_, err := fmt.Fprintf(p.w, "%s: the store at %s %d, %d bytes\n", path, kind, revision, bytes)
	return err
}

// restored prints where a restore wrote, and what to do next.
func (p *printer) restored(where, next string) error {
	if p.json {
		return p.encode(struct {
			Restored string `json:"restored"`
			Next     string `json:"next"`
		}{where, next})
	}
	_, err := fmt.Fprintf(p.w, "restored into %s: %s\n", where, next)
	return err
}

// deleted prints what a delete removed; its JSON is the admin API's.
func (p *printer) deleted(d admin.Deleted) error {
	if p.json {
		return p.encode(d)
	}
	_, err := fmt.Fprintf(p.w, "%s deleted (it was %s, at revision %d), by %s: %s\n", d.ID, d.Status, d.Revision, d.Actor, oneLine(d.Reason))
	return err
}
