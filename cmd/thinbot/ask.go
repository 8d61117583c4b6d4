package main

import (
	"context"
	"errors"
)

// cmdAsk is a placeholder until its issue lands; it is replaced, not extended.
func cmdAsk(_ context.Context, _ *env, _ []string) error {
	return errors.New("ask: not built yet")
}
