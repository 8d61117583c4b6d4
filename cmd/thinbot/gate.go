package main

import (
	"context"
	"errors"
)

// cmdGate is a placeholder until its issue lands; it is replaced, not extended.
func cmdGate(_ context.Context, _ *env, _ []string) error {
	return errors.New("gate: not built yet")
}
