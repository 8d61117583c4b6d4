package main

import (
	"context"
	"errors"
)

// cmdAudit is a placeholder until its issue lands; it is replaced, not extended.
func cmdAudit(_ context.Context, _ *env, _ []string) error {
	return errors.New("audit: not built yet")
}
