// Package storecall holds what the network-backed stores (etcdstore,
// kube) do the same way: preparing a call's context and writing a
// take-over into a record.
package storecall

import (
	"context"
	"fmt"
	"time"

	"github.com/execfsm/execfsm/transition"
)

// Context refuses a nil or done ctx and gives one without a deadline the
// store's timeout, so an unreachable backend yields an error, not a hang.
func Context(ctx context.Context, pkg, op string, timeout time.Duration) (context.Context, context.CancelFunc, error) {
	if ctx == nil {
		return nil, nil, fmt.Errorf("%s: %s: %w", pkg, op, transition.ErrNilContext)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	return ctx, cancel, nil
}

// HistoryKept bounds the audit trail a take-over writes, like Persisted's
// default.
const HistoryKept = 16

// TakeOver returns a copy of rec owned by holder at epoch, with an audit
// entry saying why, its trail bounded to HistoryKept entries.
func TakeOver(rec transition.Record, holder string, epoch uint64, reason string, now time.Time) transition.Record {
	next := rec.Clone()
	now = now.UTC().Round(0)
	next.Owner, next.Epoch, next.UpdatedAt = holder, epoch, now
	next.History = append(next.History, transition.Entry{From: rec.Status, To: rec.Status, Reason: reason,
		Actor: holder, Owner: holder, Epoch: epoch, At: now, Revision: rec.Revision})
	if len(next.History) > HistoryKept {
		next.History = next.History[len(next.History)-HistoryKept:]
	}
	return next
}
