package skills

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
)

// realSet reads the 80 realistic skill descriptions of testdata.
func realSet(t testing.TB) Set {
	t.Helper()
	f, err := os.Open("testdata/descriptions.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var s Set
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		name, desc, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			t.Fatalf("bad line %q", sc.Text())
		}
		s.Skills = append(s.Skills, Skill{Name: name, Description: desc})
	}
	if len(s.Skills) != 80 {
		t.Fatalf("%d skills in testdata/descriptions.tsv, want 80", len(s.Skills))
	}
	return s
}

// indexStats measures an index: skills listed without a description, and
// the skills whose line keeps at least FloorDescription bytes of it.
func indexStats(s Set, idx string) (bare, floor int, lineOf map[string]string) {
	lineOf = map[string]string{}
	for l := range strings.SplitSeq(idx, "\n") {
		if rest, ok := strings.CutPrefix(l, namesLead); ok {
			bare += len(strings.Split(rest, ", "))
			continue
		}
		name, desc, ok := strings.Cut(strings.TrimPrefix(l, "- "), ": ")
		lineOf[name] = l
		if !ok {
			bare++
		} else if len(desc) >= FloorDescription || !strings.HasSuffix(desc, "…") {
			floor++
		}
	}
	return bare, floor, lineOf
}

const figuresQuery = "The disk on db01 is almost full and postgres writes fail, what is using the space?"

// TestIndexFigures prints, for 80 realistic skills, what the index costs and
// keeps at 8k, 32k and 128k windows with the kernel's options
// (IndexOptionsFor, default share), ranked against a first message about a
// full disk. Run with -v to see the table.
func TestIndexFigures(t *testing.T) {
	s := realSet(t)
	t.Logf("80 skills, descriptions %d-%d bytes (mean %d); query %q", minDesc(s), maxDesc(s), meanDesc(s), figuresQuery)
	t.Logf("%7s %8s %8s %11s %10s %9s %9s %6s  %s", "window", "budget", "index", "tok/skill", "%window", "no-desc", "floor60+", "whole", "top matches (line bytes)")
	for _, w := range []int{8192, 32768, 131072} {
		o := IndexOptionsFor(w, 0, figuresQuery)
		idx := s.IndexWith(o)
		tok := EstimateTokens(idx)
		bare, floor, lineOf := indexStats(s, idx)
		order, _ := s.Rank(figuresQuery)
		var top []string
		for _, i := range order[:4] {
			top = append(top, fmt.Sprintf("%s %d", s.Skills[i].Name, len(lineOf[s.Skills[i].Name])))
		}
		whole := 0
		for _, sk := range s.Skills {
			if lineOf[sk.Name] == "- "+sk.Name+": "+sk.Description {
				whole++
			}
		}
		t.Logf("%7d %8d %8d %11.1f %9.1f%% %9d %9d %6d  %s", w, o.Budget, len(idx), float64(tok)/80, 100*float64(tok)/float64(w), bare, floor, whole, strings.Join(top, ", "))
		if w >= 32768 && (bare > 0 || floor < 80) {
			t.Errorf("window %d: %d skills without a description, %d with the floor; want 0 and 80", w, bare, floor)
		}
		for _, i := range order[:3] {
			if l := lineOf[s.Skills[i].Name]; len(l) < 100 && len(l) < len("- "+s.Skills[i].Name+": "+s.Skills[i].Description) {
				t.Errorf("window %d: best match %s keeps only %q", w, s.Skills[i].Name, l)
			}
		}
		if 100*tok > 9*w {
			t.Errorf("window %d: the index takes %d tokens, over 9%% of the window", w, tok)
		}
	}
}

func minDesc(s Set) int {
	m := 1 << 30
	for _, sk := range s.Skills {
		m = min(m, len(sk.Description))
	}
	return m
}

func maxDesc(s Set) int {
	m := 0
	for _, sk := range s.Skills {
		m = max(m, len(sk.Description))
	}
	return m
}

func meanDesc(s Set) int {
	n := 0
	for _, sk := range s.Skills {
		n += len(sk.Description)
	}
	return n / len(s.Skills)
}

func TestRank(t *testing.T) {
	s := realSet(t)
	order, scores := s.Rank(figuresQuery)
	top := s.Skills[order[0]].Name
	if top != "disk-usage" && top != "postgres-health" {
		t.Errorf("best match for a full disk is %s", top)
	}
	o2, _ := s.Rank(figuresQuery)
	if fmt.Sprint(order) != fmt.Sprint(o2) {
		t.Error("Rank is not deterministic")
	}
	_, zero := s.Rank("")
	for i, sc := range zero {
		if sc != 0 {
			t.Errorf("empty query scores %s %d", s.Skills[i].Name, sc)
		}
	}
	if scores[order[len(order)-1]] != 0 {
		t.Error("every skill matched a disk question")
	}
}

// The index is a pure function of the set and the options: the same query
// gives the same bytes (the session's prompt prefix), another query may
// not.
func TestIndexIsStableForAQuery(t *testing.T) {
	s := realSet(t)
	o := IndexOptionsFor(8192, 0, figuresQuery)
	a, b := s.IndexWith(o), s.IndexWith(o)
	if a != b {
		t.Fatal("same options, different index")
	}
	o.Query = "rotate the TLS certificate of the web front end"
	if c := s.IndexWith(o); c == a {
		t.Error("a different first message ranks the same skills first")
	}
}

// When not even the floors fit, matching skills keep their lines, the rest
// are named on one trailing line, and no skill is dropped.
func TestIndexPackedKeepsEverySkill(t *testing.T) {
	s := realSet(t)
	for _, budget := range []int{0, 500, 1500, 3000} {
		idx := s.IndexWith(IndexOptions{Budget: max(budget, 1), MaxBudget: budget, Query: figuresQuery})
		for _, sk := range s.Skills {
			if !strings.Contains(idx, "- "+sk.Name+":") && !strings.Contains(idx, "- "+sk.Name+"\n") &&
				!strings.Contains(idx, " "+sk.Name+",") && !strings.HasSuffix(idx, " "+sk.Name) {
				t.Errorf("budget %d: %s is missing", budget, sk.Name)
			}
		}
		if budget >= 1500 && !strings.Contains(idx, "- disk-usage: ") {
			t.Errorf("budget %d: the best match has no description:\n%s", budget, idx)
		}
	}
}
