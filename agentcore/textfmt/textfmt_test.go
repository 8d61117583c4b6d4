package textfmt

import (
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones without /usr/share/zoneinfo
	"unicode/utf8"
)

func TestEnds(t *testing.T) {
	for _, tc := range []struct {
		s          string
		head, tail int
		h, t       string
	}{
		{"abcdef", 2, 2, "ab", "ef"},
		{"abcdef", 3, 3, "abcdef", ""},
		{"abcdef", 10, 0, "abcdef", ""},
		{"abcdef", 0, 0, "", ""},
		{"abcdef", -1, 2, "", "ef"},
		{"aééz", 2, 2, "a", "z"},           // é is 2 bytes: cuts back off
		{"aéééz", 3, 3, "aé", "éz"},        // on a boundary
		{"€€€", 4, 0, "€", ""},             // 3-byte runes
		{"\x80\x80\x80\x80", 2, 1, "", ""}, // no rune start: nothing kept
	} {
		h, tl := Ends(tc.s, tc.head, tc.tail)
		if h != tc.h || tl != tc.t {
			t.Errorf("Ends(%q, %d, %d) = %q, %q, want %q, %q", tc.s, tc.head, tc.tail, h, tl, tc.h, tc.t)
		}
	}
}

func TestHeadTail(t *testing.T) {
	for _, tc := range []struct {
		s     string
		limit int
		want  string
	}{
		{"short", 10, "short"},
		{"0123456789", 10, "0123456789"},
		{"0123456789abcdef", 10, "01234\n[... 6 bytes omitted ...]\nbcdef"},
		{strings.Repeat("é", 10), 5, "é\n[... 16 bytes omitted ...]\né"},
	} {
		if got := HeadTail(tc.s, tc.limit); got != tc.want {
			t.Errorf("HeadTail(%q, %d) = %q, want %q", tc.s, tc.limit, got, tc.want)
		}
	}
}

func TestOneLine(t *testing.T) {
	for _, tc := range []struct {
		s     string
		limit int
		want  string
	}{
		{"  a\n\tb  c \n", 80, "a b c"},
		{"0123456789", 10, "0123456789"},
		{"0123456789a", 10, "0123456..."},
		{"ab€cdef", 7, "ab..."}, // the cut at 4 splits €: dropped
		{"a\xffb\xffcdefgh", 7, "ab..."},
		{"", 80, ""},
	} {
		if got := OneLine(tc.s, tc.limit); got != tc.want {
			t.Errorf("OneLine(%q, %d) = %q, want %q", tc.s, tc.limit, got, tc.want)
		}
	}
}

func TestCodeSpan(t *testing.T) {
	for _, tc := range []struct {
		s     string
		limit int
		want  string
	}{
		{"rm -rf `pwd`", 80, "`rm -rf 'pwd'`"},
		{" \n ", 80, "`-`"},
		{"a``b\nc", 80, "`a''b c`"},
		{"0123456789a", 10, "`0123456...`"},
	} {
		if got := CodeSpan(tc.s, tc.limit); got != tc.want {
			t.Errorf("CodeSpan(%q, %d) = %q, want %q", tc.s, tc.limit, got, tc.want)
		}
	}
}

func TestShellQuote(t *testing.T) {
	for s, want := range map[string]string{
		"":          "''",
		"/var/log":  "'/var/log'",
		"it's":      `'it'\''s'`,
		"$(id) `x`": "'$(id) `x`'",
	} {
		if got := ShellQuote(s); got != want {
			t.Errorf("ShellQuote(%q) = %q, want %q", s, got, want)
		}
	}
}

// FuzzEnds checks what every caller relies on: the head is a prefix of at
// most head bytes, the tail a suffix of at most tail bytes, they do not
// overlap, and valid UTF-8 stays valid.
func FuzzEnds(f *testing.F) {
	f.Add("aééz€", 3, 2)
	f.Add("\x80\x80\xff", 1, 1)
	f.Add("", 0, 0)
	f.Fuzz(func(t *testing.T, s string, head, tail int) {
		h, tl := Ends(s, head, tail)
		if !strings.HasPrefix(s, h) || !strings.HasSuffix(s, tl) || len(h)+len(tl) > len(s) {
			t.Fatalf("Ends(%q, %d, %d) = %q, %q: not a head and a tail of s", s, head, tail, h, tl)
		}
		if h != s && (len(h) > max(head, 0) || len(tl) > max(tail, 0)) {
			t.Fatalf("Ends(%q, %d, %d) = %q, %q: longer than asked", s, head, tail, h, tl)
		}
		if utf8.ValidString(s) && (!utf8.ValidString(h) || !utf8.ValidString(tl)) {
			t.Fatalf("Ends(%q, %d, %d) = %q, %q: split a UTF-8 sequence", s, head, tail, h, tl)
		}
	})
}

// FuzzOneLine checks that OneLine's result is one line within limit and
// valid UTF-8, and that CodeSpan's cannot close its span.
func FuzzOneLine(f *testing.F) {
	f.Add("a\nb `c`", 10)
	f.Add("ab€cd\xff", 4)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		limit = 3 + abs(limit)%300
		got := OneLine(s, limit)
		if len(got) > limit || strings.ContainsAny(got, "\n\r\t") {
			t.Fatalf("OneLine(%q, %d) = %q: not one line within the limit", s, limit, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("OneLine(%q, %d) = %q: invalid UTF-8", s, limit, got)
		}
		span := CodeSpan(s, limit)
		if strings.Count(span, "`") != 2 || !strings.HasPrefix(span, "`") || !strings.HasSuffix(span, "`") {
			t.Fatalf("CodeSpan(%q, %d) = %q: not one closed span", s, limit, span)
		}
	})
}

// FuzzLowerASCII checks that LowerASCII keeps every byte's place and
// lowers what strings.ToLower lowers in ASCII text.
func FuzzLowerASCII(f *testing.F) {
	f.Add("@ThinBot: HI")
	f.Add("\xffÉA\u0130")
	f.Fuzz(func(t *testing.T, s string) {
		got := LowerASCII(s)
		if len(got) != len(s) {
			t.Fatalf("LowerASCII(%q) = %q: length changed", s, got)
		}
		for i := range len(s) {
			if c := s[i]; got[i] != c && !('A' <= c && c <= 'Z' && got[i] == c+'a'-'A') {
				t.Fatalf("LowerASCII(%q) = %q: byte %d changed wrongly", s, got, i)
			}
		}
		ascii := strings.Map(func(r rune) rune {
			if r < 0x80 {
				return r
			}
			return -1
		}, s)
		if LowerASCII(ascii) != strings.ToLower(ascii) {
			t.Fatalf("LowerASCII(%q) = %q, strings.ToLower %q", ascii, LowerASCII(ascii), strings.ToLower(ascii))
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func TestClock(t *testing.T) {
	zone := func(name string) *time.Location {
		t.Helper()
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		return loc
	}
	kolkata, newYork, berlin := zone("Asia/Kolkata"), zone("America/New_York"), zone("Europe/Berlin")
	for _, tc := range []struct {
		t      time.Time
		loc    *time.Location
		layout string
		want   string
	}{
		{time.Date(2026, 12, 1, 2, 12, 0, 0, time.UTC), nil, "2006-01-02 15:04:05", "2026-12-01 02:12:00 UTC"},
		{time.Date(2026, 12, 1, 2, 12, 0, 0, time.UTC), time.UTC, "15:04", "02:12 UTC"},
		{time.Date(2026, 12, 1, 2, 12, 0, 0, time.UTC), berlin, "15:04", "03:12 CET"},
		{time.Date(2026, 7, 1, 2, 12, 0, 0, time.UTC), berlin, "15:04", "04:12 CEST"},
		// +05:30, and past midnight: the date is Kolkata's.
		{time.Date(2026, 12, 1, 20, 0, 5, 0, time.UTC), kolkata, "2006-01-02 15:04:05", "2026-12-02 01:30:05 IST"},
		// New York across the 2026 spring-forward (8 March, 07:00 UTC)...
		{time.Date(2026, 3, 8, 6, 59, 0, 0, time.UTC), newYork, "15:04", "01:59 EST"},
		{time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC), newYork, "15:04", "03:00 EDT"},
		// ...and the fall-back (1 November, 06:00 UTC): 01:30 twice, told apart.
		{time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC), newYork, "15:04", "01:30 EDT"},
		{time.Date(2026, 11, 1, 6, 30, 0, 0, time.UTC), newYork, "15:04", "01:30 EST"},
		// A time in another zone is shown in loc, not its own.
		{time.Date(2026, 12, 1, 3, 12, 0, 0, berlin), time.UTC, "15:04", "02:12 UTC"},
	} {
		if got := Clock(tc.t, tc.loc, tc.layout); got != tc.want {
			t.Errorf("Clock(%v, %v, %q) = %q, want %q", tc.t, tc.loc, tc.layout, got, tc.want)
		}
	}
}

// FuzzLinkURL: whatever the input, LinkURL gives "" or an http(s) URL with
// nothing that could end a Markdown link or start markup.
//
//	go test -run XXX -fuzz FuzzLinkURL -fuzztime 20s ./agentcore/textfmt/
func FuzzLinkURL(f *testing.F) {
	for _, s := range []string{"https://h/x", "HTTPS://h/a)b](c", "javascript:alert(1)", "http://h/x\n@channel", "https://"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u := LinkURL(s)
		if u == "" {
			return
		}
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") || strings.ContainsAny(u, "()<>[]|`\"'\\*_~{} \t\r\n") {
			t.Errorf("LinkURL(%q) = %q", s, u)
		}
	})
}
