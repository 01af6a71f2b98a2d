package fleettest

import (
	"hash/maphash"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/execfsm/execfsm/recovery"
)

// key returns the hash of what the fleet's future depends on: the clock,
// each record as the decisions read it, each pod's phase and hold, and
// what the explorer counts. Two paths that reach the same key reach the
// same state, and the explorer goes on from one of them.
//
// It leaves out what no decision reads: revisions and epochs as numbers
// (a pod's claim is kept as whether the record carries it), the audit
// trail, reasons, and the revision a start was decided on.
func (w *world[S]) key(seed maphash.Seed) uint64 {
	var b strings.Builder
	num := func(n int64) { b.WriteString(strconv.FormatInt(n, 36)); b.WriteByte(',') }
	flag := func(f bool) {
		if f {
			b.WriteByte('1')
		} else {
			b.WriteByte('0')
		}
	}
	num(w.now.Unix())
	num(int64(w.crashes))
	num(int64(w.drains))
	num(int64(w.reruns))
	for _, ex := range w.execs {
		rec := w.record(ex)
		b.WriteString(rec.Status)
		b.WriteByte('|')
		b.WriteString(rec.Previous)
		b.WriteByte('|')
		b.WriteString(rec.Owner)
		b.WriteByte('|')
		num(rec.Since.Unix())
		for _, k := range slices.Sorted(maps.Keys(rec.Meta)) {
			v := rec.Meta[k]
			switch k {
			case recovery.MetaStartup:
				// "resume@41 2/3": the revision is left out.
				head, counts, _ := strings.Cut(v, " ")
				name, _, _ := strings.Cut(head, "@")
				v = name + " " + counts
			case recovery.MetaFailure:
				v = ""
			}
			b.WriteString(k)
			b.WriteByte('=')
			b.WriteString(v)
			b.WriteByte(';')
		}
		held, ok, _ := w.mem.Held(w.ctx, ex.id)
		flag(ok)
		flag(ok && held == rec.Claim())
		flag(ex.jobDone)
		flag(ex.stopAsked)
		flag(ex.gone)
		num(int64(ex.deaths))
		num(int64(ex.counted))
		for _, t := range w.recentResumes(ex) {
			num(t.Unix())
		}
		b.WriteByte('/')
		if ex.seen != nil {
			flag(*ex.seen == rec.Claim())
			num(ex.seenSince.Unix())
		}
		for _, p := range ex.pods {
			b.WriteString(p.name)
			num(int64(p.phase))
			flag(p.cut)
			flag(p.lost)
			flag(p.exit == 0)
			flag(p.holds())
			flag(p.exec.Claim() == rec.Claim())
			flag(p.exec.Claim().Owner != "")
		}
		b.WriteByte('#')
	}
	return maphash.String(seed, b.String())
}
