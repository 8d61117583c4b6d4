package skills

import (
	"slices"
	"strings"
	"unicode"
)

// stopWords are left out of ranking: they match every description.
var stopWords = map[string]bool{
	"the": true, "and": true, "for": true, "with": true, "when": true, "use": true, "you": true, "your": true,
	"can": true, "this": true, "that": true, "what": true, "from": true, "are": true, "was": true, "not": true,
	"please": true, "how": true, "why": true, "into": true, "about": true, "all": true, "any": true, "has": true,
	"have": true, "its": true, "our": true, "out": true, "too": true, "user": true, "asks": true, "skill": true,
	"there": true, "then": true, "them": true, "they": true, "will": true, "would": true, "could": true, "should": true,
}

// rankWords returns the distinct ranking words of s: lowercase runs of
// letters and digits, three or more long, without stop words, with a plain
// English suffix ("s", "es", "ed", "ing") removed.
func rankWords(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if len(w) < 3 || stopWords[w] {
			continue
		}
		out[stem(w)] = true
	}
	return out
}

func stem(w string) string {
	for _, suf := range []string{"ing", "es", "ed", "s"} {
		if strings.HasSuffix(w, suf) && len(w)-len(suf) >= 3 {
			return w[:len(w)-len(suf)]
		}
	}
	return w
}

// Rank orders the skills for query: a query word found in a skill's name
// scores 2, in its description 1, each distinct word once. It returns the
// indexes into s.Skills, best first (ties by name), and the score of each
// skill. It is deterministic; an empty query gives name order and zeros.
func (s Set) Rank(query string) (order []int, scores []int) {
	q := rankWords(query)
	scores = make([]int, len(s.Skills))
	if len(q) > 0 {
		for i, sk := range s.Skills {
			name := rankWords(strings.ReplaceAll(sk.Name, "-", " "))
			desc := rankWords(sk.Description)
			for w := range q {
				switch {
				case name[w]:
					scores[i] += 2
				case desc[w]:
					scores[i]++
				}
			}
		}
	}
	order = make([]int, len(s.Skills))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if scores[a] != scores[b] {
			return scores[b] - scores[a]
		}
		return strings.Compare(s.Skills[a].Name, s.Skills[b].Name)
	})
	return order, scores
}
