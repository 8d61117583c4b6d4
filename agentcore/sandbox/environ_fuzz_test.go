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
