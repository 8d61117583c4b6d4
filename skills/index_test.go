package skills

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// words is a vocabulary for generated descriptions.
var words = strings.Fields(`analyse summarise the logs disk usage of a service when user asks
for incident report latency errors certificates expiry backup restore database queries slow
deploy rollback kubernetes pods nodes memory pressure network ports firewall rules and then`)

// genDescription returns a deterministic description of about n bytes.
func genDescription(i, n int) string {
	var b strings.Builder
	for j := 0; b.Len() < n; j++ {
		if j > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[(i*7+j*3)%len(words)])
	}
	return b.String()
}

// genSet returns n skills whose descriptions range from 60 to 660 bytes,
// like the real-world spread (median about 220).
func genSet(n int) Set {
	var s Set
	for i := range n {
		s.Skills = append(s.Skills, Skill{Name: fmt.Sprintf("skill-%03d", i), Description: genDescription(i, 60+(i*37)%600)})
	}
	return s
}

func TestIndex(t *testing.T) {
	s := Set{Skills: []Skill{
		{Name: "a", Description: "  first\n\tline   two  "},
		{Name: "b", Description: strings.Repeat("word ", 100)},
		{Name: "c", Description: strings.Repeat("語", 200)},
	}}
	got := s.Index(0)
	lines := strings.Split(got, "\n")
	if len(lines) != 3 || lines[0] != "- a: first line two" {
		t.Fatalf("Index = %q", got)
	}
	for _, l := range lines {
		if len(l) > MaxIndexLine || !utf8.ValidString(l) {
			t.Errorf("line %q: %d bytes, valid UTF-8 %v", l, len(l), utf8.ValidString(l))
		}
	}
	if !strings.HasSuffix(lines[1], "word…") {
		t.Errorf("long line not cut at a word: %q", lines[1])
	}
	if (Set{}).Index(100) != "" {
		t.Error("empty set gives a non-empty index")
	}
	if got := s.Index(10); got != namesLead+"a, b, c" {
		t.Errorf("Index(10) = %q, want names only", got)
	}
}

func TestIndexBudget(t *testing.T) {
	s := genSet(100)
	for _, budget := range []int{IndexBudget(0), IndexBudget(128000), 4000, 2000, 1500} {
		idx := s.Index(budget)
		for i, sk := range s.Skills {
			if n := strings.Count(idx, sk.Name+":") + strings.Count(idx, sk.Name+",") + strings.Count(idx, sk.Name+"\n"); !strings.HasSuffix(idx, sk.Name) && n != 1 {
				t.Errorf("budget %d: skill %d (%s) appears %d times", budget, i, sk.Name, n)
			}
		}
		if len(idx) > budget {
			t.Errorf("budget %d: index is %d bytes", budget, len(idx))
		}
	}
	if IndexBudget(128000) != 10240 {
		t.Errorf("IndexBudget(128000) = %d", IndexBudget(128000))
	}
}

// TestIndexTokensPerLine reports the average index cost per skill for 100
// skills, by the EstimateTokens rule.
func TestIndexTokensPerLine(t *testing.T) {
	s := genSet(100)
	for _, budget := range []int{1 << 20, DefaultIndexBudget} {
		idx := s.Index(budget)
		avg := float64(EstimateTokens(idx)) / 100
		t.Logf("100 skills, budget %d bytes: %d bytes, %.1f tokens per index line", budget, len(idx), avg)
		if avg > 80 {
			t.Errorf("average %.1f tokens per line, want at most 80", avg)
		}
	}
}

func TestEstimateTokens(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"", 0}, {"abc", 1}, {"abcd", 1}, {"abcde", 2}, {"語", 1}, {"ab語cd", 3}, {"🙂🙂", 2},
	}
	for _, tt := range tests {
		if got := EstimateTokens(tt.in); got != tt.want {
			t.Errorf("EstimateTokens(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestGetAndText(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "tx")
	writeSkill(t, dir, "tx", "text test", "")
	body := "Run `bash {SKILL_DIR}/scripts/a.sh` or {baseDir}/b.\n"
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte("---\nname: tx\ndescription: d\n---\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"scripts/a.sh", "references/r.md", ".git/config", "a/b/c/d/deep.txt"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set := Load([]string{root}, Options{Probe: testProbe()})
	sk, ok := set.Get("tx")
	if !ok {
		t.Fatalf("Get(tx) failed: %+v", set)
	}
	if _, ok := set.Get("nope"); ok {
		t.Error("Get(nope) found a skill")
	}
	if b, err := sk.ReadBody(); err != nil || b != body {
		t.Errorf("ReadBody = %q, %v (must stay raw)", b, err)
	}
	got, err := sk.Text()
	if err != nil {
		t.Fatal(err)
	}
	want := "Run `bash " + sk.Dir + "/scripts/a.sh` or " + sk.Dir + "/b.\n\n[skill folder: " + sk.Dir +
		"]\nFiles:\n- SKILL.md\n- references/r.md\n- scripts/a.sh\n"
	if got != want {
		t.Errorf("Text =\n%s\nwant\n%s", got, want)
	}
}

func FuzzParseFrontmatter(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/corpus/*/SKILL.md")
	for _, p := range seeds {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	for _, s := range []string{"", "---", "---\n---", "---\r\n---\r\n", "\xef\xbb\xbf---\na: b\n---\n",
		"---\na: &x [*x]\n---\n", "---\na: &a [1,1]\nb: &b [*a,*a]\nc: [*b,*b]\n---\n", "---\n: x\n---\n",
		"---\nkey: \"unterminated\n---\n", "---\n\tname: tab\n---\n", "---\n? [a]\n: b\n---\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fm, body, err := ParseFrontmatter(data)
		if err != nil {
			if fm != nil || body != "" {
				t.Errorf("error %v with fm %v body %q", err, fm, body)
			}
			return
		}
		if fm == nil {
			t.Error("nil map without error")
		}
		norm := strings.ReplaceAll(string(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))), "\r\n", "\n")
		if !strings.HasSuffix(norm, body) {
			t.Errorf("body %q is not a suffix of the input", body)
		}
	})
}

func BenchmarkLoad500(b *testing.B) {
	root := b.TempDir()
	for i := range 500 {
		name := fmt.Sprintf("skill-%03d", i)
		extra := ""
		if i%5 == 0 {
			extra = "requires:\n  bins: [sh]\nmetadata:\n  author: bench\n  openclaw: {requires: {env: [HOME_SET]}}\n"
		}
		writeSkill(b, filepath.Join(root, name), name, genDescription(i, 200), extra)
	}
	opts := Options{Probe: testProbe()}
	b.ResetTimer()
	for b.Loop() {
		set := Load([]string{root}, opts)
		if len(set.Skills) != 500 {
			b.Fatalf("loaded %d", len(set.Skills))
		}
	}
}

func BenchmarkIndex100(b *testing.B) {
	s := genSet(100)
	var idx string
	for b.Loop() {
		idx = s.Index(DefaultIndexBudget)
	}
	if !strings.Contains(idx, s.Skills[0].Name) {
		b.Fatalf("the index does not list the first skill:\n%s", idx)
	}
	b.ReportMetric(float64(EstimateTokens(idx))/100, "tokens/line")
}
