package main

import (
	"context"
	"errors"
)

// cmdSkills is a placeholder until its issue lands; it is replaced, not extended.
func cmdSkills(_ context.Context, _ *env, _ []string) error {
	return errors.New("skills: not built yet")
}
