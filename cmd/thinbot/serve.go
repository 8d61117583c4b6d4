package main

import (
	"context"
	"errors"
)

// cmdServe is a placeholder until its issue lands; it is replaced, not extended.
func cmdServe(_ context.Context, _ *env, _ []string) error {
	return errors.New("serve: not built yet")
}
