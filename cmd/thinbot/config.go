package main

import (
	"context"
	"errors"
)

// cmdConfig is a placeholder until its issue lands; it is replaced, not extended.
func cmdConfig(_ context.Context, _ *env, _ []string) error {
	return errors.New("config: not built yet")
}
