package sandbox

import (
	"strings"
	"testing"
)

// FuzzEnviron: the environment hand-over of HideEnviron gives back every
// entry it was given that os.Setenv can hold (a name without "=" or NUL,
// a value without NUL), in order, and nothing else.
func FuzzEnviron(f *testing.F) {
	for _, seed := range []string{
		"PATH=/usr/bin\x00HOME=/root",
		"AGENT_API_KEY=sk-abc=def\x00EMPTY=",
		"=bad\x00novalue\x00X=1",
		"",
		"A=\x00\x00B=2",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, joined string) {
		in := strings.Split(joined, "\x00")
		var want [][2]string
		for _, kv := range in {
			if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
				want = append(want, [2]string{k, v})
			}
		}
		got := decodeEnviron(encodeEnviron(in))
		if len(got) != len(want) {
			t.Fatalf("decode(encode(%q)) = %q, want %q", in, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("entry %d = %q, want %q", i, got[i], want[i])
			}
			if strings.Contains(got[i][0], "=") || strings.ContainsRune(got[i][0], 0) || strings.ContainsRune(got[i][1], 0) {
				t.Fatalf("entry %d = %q cannot be a variable", i, got[i])
			}
		}
	})
}

// FuzzHandOver: HideEnviron's hand-over gives back the arguments it was
// given, in order, and the environment's bytes after them; any other
// input is an error or a result, never a panic.
func FuzzHandOver(f *testing.F) {
	f.Add("thinbot\x01serve\x01--config\x01/etc/thinbot/config.yaml", "PATH=/usr/bin\x00HOME=/root", []byte("2\x00a\x00\x00X=1\x00"))
	f.Add("", "", []byte("0\x00"))
	f.Add("\x01\x01", "A=", []byte("3\x00a\x00b\x00"))
	f.Add("x", "", []byte("-1\x00"))
	f.Fuzz(func(t *testing.T, args, environ string, raw []byte) {
		in := strings.Split(args, "\x01")
		if args == "" {
			in = nil
		}
		for _, a := range in {
			if strings.ContainsRune(a, 0) {
				return // no kernel argument holds a NUL
			}
		}
		env := strings.Split(environ, "\x00")
		got, rest, err := decodeHandOver(encodeHandOver(in, env))
		if err != nil || len(got) != len(in) || string(rest) != string(encodeEnviron(env)) {
			t.Fatalf("decode(encode(%q, %q)) = %q, %q, %v", in, env, got, rest, err)
		}
		for i := range got {
			if got[i] != in[i] {
				t.Fatalf("argument %d = %q, want %q", i, got[i], in[i])
			}
		}
		if a, _, err := decodeHandOver(raw); err == nil && len(a) > len(raw) {
			t.Fatalf("decode(%q) = %d arguments from %d bytes", raw, len(a), len(raw))
		}
	})
}
