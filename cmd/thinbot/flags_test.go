package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// Every command and verb parses its flags through flagSet.parse: -h
// prints the flags and succeeds, an unknown flag is a usage error that
// names it (TestEveryCommandHelpExitsZero covers the commands alone).
func TestEveryVerbParsesFlagsAlike(t *testing.T) {
	for _, cmd := range [][]string{
		{"audit", "verify"}, {"audit", "export"}, {"audit", "tail"}, {"audit", "rebuild"}, {"audit", "timeline"},
		{"config", "check"}, {"gate", "check"}, {"gate", "policy"}, {"sandbox", "check"}, {"sandbox", "exec"},
		{"sessions", "list"}, {"sessions", "clear"}, {"skills", "check"}, {"skills", "install"}, {"skills", "lock"},
		{"hosts"}, {"serve"}, {"ask"}, {"chat"}, {"goal"}, {"skills"},
	} {
		var out bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
		name := strings.Join(cmd, " ")
		if err := run(t.Context(), e, append(cmd, "-h")); err != nil {
			t.Errorf("thinbot %s -h: %v\n%s", name, err, out.String())
		}
		out.Reset()
		err := run(t.Context(), e, append(cmd, "--no-such-flag"))
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "flag provided but not defined: -no-such-flag") {
			t.Errorf("thinbot %s --no-such-flag: %v, want a usage error naming the flag", name, err)
		}
	}
}
