package storage_test

import "context"

var bg = context.Background()
