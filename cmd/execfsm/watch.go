package main

import (
	"context"
)

// watch prints the records (those of ids, or all) as they are, then each
// change as it lands, until ctx ends (an interrupt), which is success.
func watch(ctx context.Context, b *backend, ids []string, out *printer) error {
	for ev, err := range b.op.Watch(ctx, ids...) {
		if err != nil {
			return storeError(err)
		}
		if err := out.event(ev); err != nil {
			return err
		}
	}
	return nil // interrupted
}
