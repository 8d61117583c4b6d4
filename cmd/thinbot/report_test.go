package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

type silentErr struct{}

func (silentErr) Error() string { return "exit status 3" }
func (silentErr) Silent() bool  { return true }

// TestReportError: the error that ends the process is plain text, a JSON
// log line where the command logs JSON, and nothing when silent.
func TestReportError(t *testing.T) {
	var b bytes.Buffer
	reportError(&b, false, errors.New("boom"), 1)
	if b.String() != "thinbot: boom\n" {
		t.Errorf("plain: %q", b.String())
	}
	b.Reset()
	reportError(&b, true, fmt.Errorf("mattermost: %w", errors.New("connection refused")), 1)
	var line struct {
		Level, Msg, Err string
		ExitCode        int `json:"exit_code"`
	}
	if err := json.Unmarshal(b.Bytes(), &line); err != nil || line.Level != "ERROR" || line.Msg != "thinbot exited" ||
		line.Err != "mattermost: connection refused" || line.ExitCode != 1 {
		t.Errorf("JSON: %+v (%v) from %q", line, err, b.String())
	}
	for _, logJSON := range []bool{false, true} {
		b.Reset()
		reportError(&b, logJSON, fmt.Errorf("run: %w", silentErr{}), 3)
		if b.Len() != 0 {
			t.Errorf("a silent error was written (JSON %v): %q", logJSON, b.String())
		}
	}
}
