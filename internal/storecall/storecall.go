// Package storecall holds what every store does the same way when a call
// begins: refusing a nil or done context, and bounding a network call.
package storecall

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// errNilContext is what every call given a nil context returns. It is not
// exported: as in the standard library, a nil context is a programming
// error to fix, not a condition to handle. It is an error and not a panic
// only because nothing in this module panics on input.
var errNilContext = errors.New("nil context.Context (pass context.Background() or context.TODO())")

// Check returns an error naming pkg and op if ctx is nil, and ctx's error
// if it is done.
func Check(ctx context.Context, pkg, op string) error {
	if ctx == nil {
		return fmt.Errorf("%s: %s: %w", pkg, op, errNilContext)
	}
	return ctx.Err()
}

// Context refuses a nil or done ctx and gives one without a deadline the
// store's timeout, so an unreachable backend yields an error, not a hang.
func Context(ctx context.Context, pkg, op string, timeout time.Duration) (context.Context, context.CancelFunc, error) {
	if err := Check(ctx, pkg, op); err != nil {
		return nil, nil, err
	}
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	return ctx, cancel, nil
}
