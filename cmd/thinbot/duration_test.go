package main

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// oldDuration is how loadConfig read a duration before the duration type:
// the key as a string, then time.ParseDuration, positive, "" for unset.
func oldDuration(key, s string) (time.Duration, string) {
	if s == "" {
		return 0, ""
	}
	v, err := time.ParseDuration(s)
	if err != nil || v <= 0 {
		return 0, fmt.Sprintf("%s %q: want a positive duration like 15m", key, s)
	}
	return v, ""
}

// newDuration decodes doc's key t into a duration and checks it.
func newDuration(doc string) (time.Duration, string, error) {
	var c struct {
		T duration `yaml:"t"`
	}
	if err := yaml.Unmarshal([]byte(doc), &c); err != nil {
		return 0, "", err
	}
	var msg string
	c.T.check(func(f string, a ...any) { msg = fmt.Sprintf(f, a...) }, "t", "15m")
	return c.T.Duration, msg, nil
}

// The duration type takes what the string fields took, with the same
// values and the same problems, and a value that is not a scalar fails the
// decoding with the same error.
func TestDurationAsTheStringFieldWas(t *testing.T) {
	for _, doc := range []string{
		"t: 15m", "t: 1h30m", "t: 90s", "t: 500ms", `t: "2m"`, "t: ''", "t:", "t: ~", "",
		"t: soon", "t: 0", "t: 0s", "t: -5m", "t: 30", "t: 1.5h", "t: true",
		"t: [1m]", "t: {a: 1}",
	} {
		var old struct {
			T string `yaml:"t"`
		}
		oerr := yaml.Unmarshal([]byte(doc), &old)
		got, msg, err := newDuration(doc)
		if (oerr == nil) != (err == nil) || (err != nil && err.Error() != oerr.Error()) {
			t.Errorf("%q: decode error %v, the string field's %v", doc, err, oerr)
			continue
		}
		if err != nil {
			continue
		}
		want, wantMsg := oldDuration("t", old.T)
		if got != want || msg != wantMsg {
			t.Errorf("%q: %v %q, want %v %q", doc, got, msg, want, wantMsg)
		}
	}
}

// unknownKeys stops at a duration: a mapping there is the decoder's
// error ("cannot unmarshal !!map"), as it was for the string field, not a
// list of unknown keys of a section that has none.
func TestUnknownKeysStopAtADuration(t *testing.T) {
	var root yaml.Node
	if err := yaml.Unmarshal([]byte("model: {timeout: {a: 1}}\napproval_timeout: [x]\n"), &root); err != nil {
		t.Fatal(err)
	}
	if errs := unknownKeys(&root, reflect.TypeFor[daemonConfig](), ""); errs != nil {
		t.Errorf("unknownKeys walked into a duration: %v", errs)
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"15m", "1h30m", "0", "-1s", "soon", "", "9223372036854775807ns", "1.5h", "+3s", ".5m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseDuration(s)
		old, oerr := time.ParseDuration(s)
		if oerr != nil || old <= 0 {
			if err == nil || v != 0 {
				t.Fatalf("parseDuration(%q) = %v, %v; time.ParseDuration says %v, %v", s, v, err, old, oerr)
			}
			return
		}
		if err != nil || v != old {
			t.Fatalf("parseDuration(%q) = %v, %v, want %v", s, v, err, old)
		}
		// What the duration type decodes from the same text, quoted.
		got, msg, derr := newDuration("t: " + fmt.Sprintf("%q", s))
		if derr == nil && (got != v || msg != "") {
			t.Fatalf("decoding %q: %v %q, want %v", s, got, msg, v)
		}
	})
}
