package agentcore

import (
	"fmt"
	"strings"
	"testing"

	"github.com/thinbot/thinbot/skills"
)

// manySkills is a set of 60 skills whose descriptions are long enough that
// an 8k window cannot keep them all.
func manySkills() skills.Set {
	var s skills.Set
	for i := range 60 {
		s.Skills = append(s.Skills, skills.Skill{Name: fmt.Sprintf("tool-%02d", i),
			Description: fmt.Sprintf("Generic helper number %d for assorted chores around services and hosts, with notes on usage, options and caveats that go on for a while.", i)})
	}
	s.Skills = append(s.Skills, skills.Skill{Name: "zz-certificates",
		Description: "Check TLS certificate expiry dates, chains and SAN names of hosts and files; renew before they expire. Use when a certificate expires or clients see TLS errors."})
	return s
}

// The skill index is ranked against the session's first message and stays
// byte-identical for the whole session: later messages about something
// else do not change the system prompt.
func TestSkillIndexIsRankedAndStableInASession(t *testing.T) {
	f := newFixture(t, Config{Skills: manySkills(), ContextWindow: 8192}, say("one"), say("two"))
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "is the TLS certificate of www about to expire?", Dir: f.dir}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.a.Run(t.Context(), Turn{Session: "s", Text: "now look at tool-03 and tool-04 please", Dir: f.dir}); err != nil {
		t.Fatal(err)
	}
	first, second := f.model.reqs[0].Messages[0].Content, f.model.reqs[1].Messages[0].Content
	if first != second {
		t.Errorf("the system prompt changed within the session")
	}
	if !strings.Contains(first, "- zz-certificates: Check TLS certificate expiry dates, chains and SAN names of hosts and files; renew before they expire.") {
		t.Errorf("the matching skill lost its description:\n%s", first)
	}
	if n := len(types(f.events(t, "s"))); n == 0 || strings.Count(strings.Join(types(f.events(t, "s")), " "), EvSystemPrompt) != 1 {
		t.Errorf("system prompt recorded %d times, want once", strings.Count(strings.Join(types(f.events(t, "s")), " "), EvSystemPrompt))
	}
	// The projection of the chain gives the same prompt.
	if got := Project(f.events(t, "s"))[0].Content; got != first {
		t.Error("Project does not give the prompt the model saw")
	}
}
