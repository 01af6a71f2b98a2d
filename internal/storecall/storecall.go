// Package storecall holds what the network-backed stores (etcdstore,
// kube) do the same way: preparing a call's context.
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
