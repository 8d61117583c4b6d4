package main

import (
	"context"
	"errors"
)

// cmdChat is a placeholder until its issue lands; it is replaced, not extended.
func cmdChat(_ context.Context, _ *env, _ []string) error {
	return errors.New("chat: not built yet")
}
