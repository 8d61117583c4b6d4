package agentcore

import (
	"fmt"
	"strings"

	"github.com/thinbot/thinbot/gate"
	"github.com/thinbot/thinbot/skills"
	"github.com/thinbot/thinbot/store"
)

// skillText serves the skill tool.
func (a *Agent) skillText(name string) (string, bool) {
	sk, ok := a.cfg.Skills.Get(name)
	if !ok {
		names := make([]string, 0, len(a.cfg.Skills.Skills))
		for _, s := range a.cfg.Skills.Skills {
			names = append(names, s.Name)
		}
		return fmt.Sprintf("error: no skill named %q; the skills are: %s", name, strings.Join(names, ", ")), true
	}
	text, err := sk.Text()
	if err != nil {
		return "error: " + err.Error(), true
	}
	return text, false
}

// openSkill returns a skill's text for the skill tool and records, before
// the model sees it, the SHA-256 of the skill's files (skill_opened). A
// skill pinned by skills.lock whose files changed since the start is not
// opened. An error is a store failure.
func (r *run) openSkill(call ToolCall, name string) (string, bool, error) {
	sk, ok := r.cfg.Skills.Get(name)
	if !ok {
		content, isErr := r.skillText(name)
		return content, isErr, nil
	}
	sum, err := sk.Digest()
	if err != nil {
		return "error: skill " + name + ": " + err.Error(), true, nil
	}
	if _, err := r.record(durable, store.Event{Type: EvSkillOpened, Actor: "system", Payload: mustJSON(SkillOpenedPayload{
		CallID: call.ID, Name: sk.Name, Dir: sk.Dir, SHA256: sum, Pinned: sk.SHA256})}); err != nil {
		return "", false, err
	}
	if sk.SHA256 != "" && sum != sk.SHA256 {
		return fmt.Sprintf("error: skill %s changed since it was pinned in skills.lock (files sha256 %s, pinned %s); it is not opened", name, sum, sk.SHA256), true, nil
	}
	content, isErr := r.skillText(name)
	return content, isErr, nil
}

// checkPins turns a pass verdict into confirm when the command names a
// read-only script pinned by skills.lock whose content no longer has its
// pinned hash: such a script passes only as it was reviewed.
func (a *Agent) checkPins(command string, d gate.Decision) gate.Decision {
	if d.Verdict != gate.Pass {
		return d
	}
	for p, sum := range a.cfg.Skills.PinnedScripts() {
		if !strings.Contains(command, p) {
			continue
		}
		if err := skills.VerifyScript(p, sum); err != nil {
			return gate.Decision{Verdict: gate.Confirm, Rule: "skills-lock", Reason: err.Error()}
		}
	}
	return d
}

// SkillInfo is one skill folder as the agent found it at start.
type SkillInfo struct {
	Name string
	// State is "loaded", "hidden" (its requirements failed or it could not
	// be read) or "shadowed" (an earlier folder has a skill of that name).
	State string
	// Description is a loaded skill's description.
	Description string
	// Dir is the folder of a hidden or shadowed skill.
	Dir string
	// Why is why a hidden skill is hidden, or the folder of the skill that
	// shadows this one.
	Why string
}

// Skills lists the loaded skills (sorted by name), then the hidden ones,
// then the shadowed ones, for /skills.
func (a *Agent) Skills() []SkillInfo {
	set := a.cfg.Skills
	var out []SkillInfo
	for _, s := range set.Skills {
		out = append(out, SkillInfo{Name: s.Name, State: "loaded", Description: s.Description})
	}
	for _, f := range set.Filtered {
		out = append(out, SkillInfo{Name: f.Name, State: "hidden", Dir: f.Dir, Why: f.Reason})
	}
	for _, s := range set.Shadowed {
		out = append(out, SkillInfo{Name: s.Name, State: "shadowed", Dir: s.Dir, Why: s.By})
	}
	return out
}
