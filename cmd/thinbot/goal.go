package main

import (
	"context"
	"errors"
)

// cmdGoal is a placeholder until its issue lands; it is replaced, not extended.
func cmdGoal(_ context.Context, _ *env, _ []string) error {
	return errors.New("goal: not built yet")
}
